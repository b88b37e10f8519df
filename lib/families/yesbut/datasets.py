"""YesBut's evaluation datasets built from stage 01's manifest rows: detection on every labelled
image, understanding of each annotated scene's halves and whole, completion as the paper curates it
(a 2x2 grid offering the missing half of a satirical and of a non-satirical restyling).

    yesbut_datasets(manifest_rows, out, seed=0)   # stage 01 writes datasets/yesbut with it

Halves are cut where stage 01's layout check found the panels meet (:mod:`lib.families.yesbut.panels`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from lib.core.schema import Item
from lib.families.yesbut.panels import completion_grid, split
from lib.families.yesbut.task import Completion, Detection, Understanding
from lib.io import dataset_info, held_images, images_roots, load_image, save_dataset


def detection_items(records: list[dict]) -> list[Item]:
    """Detection: every labelled image, satirical or not (Y / N), with its stage and panel styles."""
    return [
        Detection.make_item(
            f"{r['id']}-detection",
            r["path"],
            r["label"] == "satirical",
            meta={
                "stage": r.get("stage"),
                "styles": f"{r.get('left_style')}|{r.get('right_style')}",
            },
        )
        for r in records
        if r.get("label") in ("satirical", "non_satirical")
    ]


@dataclass
class Halves:
    """The left and right halves of collected images as files in ``folder``, where 01's layout check
    found the panels meet (records collected before that check: checked now); an image is read and
    cut once, for both its halves. The halves are PNG at zlib level 1: lossless copies of the
    source's pixels, which the default level 6 only makes a little smaller at several times the
    encoding time, the larger part of building the datasets."""

    folder: Path
    paths: dict = field(default_factory=dict)  # (record id, side) -> the half's file

    def __call__(self, rec: dict, side: str) -> str:
        key = (rec["id"], side)
        if key not in self.paths:
            paths = {s: self.folder / f"{rec['id']}_{s}.png" for s in ("left", "right")}
            if not all(p.exists() for p in paths.values()):
                halves = split(load_image(rec["path"]), at=(rec.get("layout") or {}).get("cut"))
                for half, path in zip(halves, paths.values()):
                    half.save(path, compress_level=1)
            self.paths.update({(rec["id"], s): str(p) for s, p in paths.items()})
        return self.paths[key]


def three_panel_ids(records: list[dict]) -> set[str]:
    """Images of three panels side by side: they have no halves, so they are never cut (their
    whole-image items stay)."""
    return {r["id"] for r in records if (r.get("layout") or {}).get("panels") == 3}


def understanding_items(records: list[dict], halves: Halves, uncut: set[str]) -> list[Item]:
    """Understanding: every satirical image whose scene is annotated - a stage-2 original, or a
    stage-3/4 restyling of an annotated original (same scene, other styles: the paper's stages) -
    each half against its description (images in ``uncut`` are not cut) and the whole against the
    overall description; stage, difficulty and text presence kept for Tables 6-8."""
    items = []
    annotated = {
        r["id"]: r["annotation"] for r in records if r.get("stage") == 2 and r.get("annotation")
    }
    for r in records:
        a = (
            annotated.get(r["id"])
            if r.get("stage") == 2
            else annotated.get(r.get("original"))
            if r.get("stage") in (3, 4) and r.get("label") == "satirical"
            else None
        )
        if not a:
            continue
        text = {"left": a.get("text_in_left"), "right": a.get("text_in_right")}
        text["whole"] = None if None in text.values() else bool(text["left"] or text["right"])
        for part, ref in (
            ("left", a.get("left_description")),
            ("right", a.get("right_description")),
            ("whole", a.get("overall_description")),
        ):
            if ref and (part == "whole" or r["id"] not in uncut):
                image = r["path"] if part == "whole" else halves(r, part)
                meta = {
                    "part": part,
                    "stage": r["stage"],
                    "difficulty": a.get("difficulty"),
                    "text": None if text[part] is None else "Y" if text[part] else "N",
                }
                if r["stage"] != 2:
                    meta["original"] = r["original"]
                items.append(Understanding.make_item(f"{r['id']}-{part}", image, ref, meta))
    return items


def completion_sources(
    generated: list[dict], kept: str, uncut: set[str]
) -> tuple[dict, dict] | None:
    """The satirical and the non-satirical restyling of one original that a completion question
    offers for the half other than ``kept`` (``kept`` in its ORIG style, the other half stylised, the
    two in different styles; the first by id), or None when the original has no such pair."""
    other = "right" if kept == "left" else "left"
    fits = lambda g, label: (
        g.get("label") == label
        and g.get(f"{kept}_style") == "ORIG"
        and g.get(f"{other}_style") != "ORIG"
    )
    sat = sorted((g for g in generated if fits(g, "satirical")), key=lambda g: g["id"])
    non = sorted(
        (
            g
            for g in generated
            if fits(g, "non_satirical")
            and (not sat or g[f"{other}_style"] != sat[0][f"{other}_style"])
        ),
        key=lambda g: g["id"],
    )
    sat, non = [g for g in sat if g["id"] not in uncut], [g for g in non if g["id"] not in uncut]
    return (sat[0], non[0]) if sat and non else None


def completion_item(
    oid: str, kept: str, sat: dict, non: dict, halves: Halves, rng: random.Random
) -> Item:
    """The completion question of original ``oid`` with its ``kept`` half shown: a 2x2 grid image
    (saved beside the halves) offering the other half of ``sat`` and of ``non``, A/B by ``rng``."""
    other = "right" if kept == "left" else "left"
    right, wrong = halves(sat, other), halves(non, other)
    options = [right, wrong]
    rng.shuffle(options)
    missing = "yes" if other == "left" else "but"
    # the original's half as the authors cut it: the ORIG half of the satirical composition
    # (an original of three panels has no half of its own to cut)
    kept_img = load_image(halves(sat, kept))
    # the kept half fills its own cell; the missing cell shows the question mark whatever is passed
    grid = completion_grid(
        kept_img, kept_img, load_image(options[0]), load_image(options[1]), missing=missing
    )
    path = halves.folder / f"{oid}-completion-{missing}.png"
    grid.save(path)
    return Completion.make_item(
        f"{oid}-completion-{missing}",
        str(path),
        0 if options[0] == right else 1,
        meta={
            "original": oid,
            "missing": missing,
            "satirical_from": sat["id"],
            "non_satirical_from": non["id"],
        },
    )


def completion_items(
    records: list[dict], halves: Halves, uncut: set[str], seed: int = 0
) -> list[Item]:
    """Completion as the paper curates it: per stage-2 original (in id order) and kept half (left,
    then right), one question where :func:`completion_sources` finds a pair; A/B by a shuffle seeded
    with ``seed``."""
    rng = random.Random(seed)
    by_original: dict = {}
    for r in records:
        if r.get("stage") in (3, 4) and r.get("original"):
            by_original.setdefault(r["original"], []).append(r)
    originals = {r["id"] for r in records if r.get("stage") == 2}
    items = []
    for oid, generated in sorted(by_original.items()):
        if oid not in originals:
            continue
        for kept in ("left", "right"):
            pair = completion_sources(generated, kept, uncut)
            if pair:
                items.append(completion_item(oid, kept, *pair, halves, rng))
    return items


def yesbut_datasets(records: list[dict], out: str | Path, seed: int = 0) -> Path:
    """A YesBut evaluation dataset folder from collected records (``lib.stages.collect`` manifest rows):
    detection on every labelled image (:func:`detection_items`); understanding on every satirical
    image whose scene is annotated - the stage-2 originals and their stage-3/4 restyled satirical
    versions, which share the original's annotation (each half, cut where 01's layout check found
    the panels meet, against its description - an image of three panels is not cut, only its whole
    is used; the whole against the overall description; :func:`understanding_items`); completion as
    the paper curates it - the original's half kept in its own (ORIG) style (taken from the
    satirical composition, where the authors cut it), the other half chosen between a stylised half
    from a satirical combination and one from a non-satirical combination of the same original, A/B
    by a seeded shuffle (:func:`completion_items`)."""
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    halves, uncut = Halves(out / "images"), three_panel_ids(records)
    items = held_images(
        detection_items(records)
        + understanding_items(records, halves, uncut)
        + completion_items(records, halves, uncut, seed),
        out,
    )
    save_dataset(
        out,
        items,
        dataset_info(
            "yesbut-collected",
            provenance={"records": len(records), "three_panels_not_cut": sorted(uncut)},
            images_roots=images_roots(items, out),
        ),
    )
    return out
