"""The blind and leak audits of stage 07's item quality (:mod:`lib.items.audits`) on a planted run:
two datasets answered by one fake stage 06. ``quiz`` has 30 images, each asked one question whose
right option is the only one saying "correct" (a text-only reader learns that) and one whose
options give nothing away; ``other`` holds a mirrored copy of quiz's first image and a question
repeated on it. The blind audit flags the giveaway questions, the leak audit the copied image's
items in both datasets; a dataset too small for folds by image is said, not raised."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageOps

from lib.core.schema import Item
from lib.io import artifacts, dataset_info, file_sha256, save_dataset, write_json, write_jsonl
from lib.items import audits, quality
from lib.stages import analyze

N_IMAGES = 30
COPIED = "quiz-0-plain"  # quiz's item on image 0 whose question `other` asks again


def _picture(seed: int) -> Image.Image:
    """A distinct picture: coarse random blocks, so no two share a perceptual hash."""
    blocks = np.random.default_rng(seed).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    return Image.fromarray(blocks).resize((96, 96), Image.NEAREST)


def _quiz(folder) -> list[Item]:
    (folder / "images").mkdir(parents=True)
    items = []
    for i in range(N_IMAGES):
        _picture(i).save(folder / f"images/{i}.png")
        image, key = [f"images/{i}.png"], i % 4
        giveaway = ["wrong guess"] * 4
        giveaway[key] = "the correct one"
        plain = [f"shade {(i + k) % 7}" for k in range(4)]
        items += [
            Item(f"quiz-{i}-giveaway", "mcq", f"What is in picture {i}?", image, giveaway, [key]),
            Item(f"quiz-{i}-plain", "mcq", f"Which shade is picture {i}?", image, plain, [key]),
        ]
    save_dataset(folder, items, dataset_info("quiz"))
    return items


def _other(folder, quiz: list[Item]) -> list[Item]:
    (folder / "images").mkdir(parents=True)
    ImageOps.mirror(_picture(0)).save(folder / "images/copy.png")  # a mirrored copy of quiz's 0
    _picture(999).save(folder / "images/own.png")
    plain = next(it for it in quiz if it.id == COPIED)
    items = [
        Item("other-copy", "mcq", plain.question, ["images/copy.png"], plain.options, [0]),
        Item("other-own", "mcq", "Which shade is this?", ["images/own.png"], plain.options, [1]),
    ]
    save_dataset(folder, items, dataset_info("other"))
    return items


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The planted run after stage 07's item-quality step."""
    root = tmp_path_factory.mktemp("audits")
    folders = {"quiz": root / "data" / "quiz", "other": root / "data" / "other"}
    quiz = _quiz(folders["quiz"])
    named = {"quiz": quiz, "other": _other(folders["other"], quiz)}
    evaluation = root / "planted" / artifacts.EVALUATE
    evaluation.mkdir(parents=True)
    rows = [
        {
            "item_id": it.id,
            "model": model,
            "task": "mcq",
            "raw": "A",
            "dataset": name,
            "parsed": "A",
            "style": "zero_shot",
            "valid": True,
            "correct": it.answer == [0],
        }
        for name, items in named.items()
        for it in items
        for model in ("m1", "m2")
    ]
    write_jsonl(evaluation / artifacts.PREDICTIONS, rows)
    digests = {n: file_sha256(f / "items.jsonl", remember=False) for n, f in folders.items()}
    write_json(evaluation / artifacts.EVAL_MANIFEST, {"datasets": digests})
    write_json(
        evaluation / artifacts.EVAL_CONFIG, {"datasets": {n: str(f) for n, f in folders.items()}}
    )
    found = analyze.item_quality(analyze.AnalyzeConfig(), root / "planted" / artifacts.ANALYZE)
    return root / "planted", found


def _flags(folder):
    return quality.read_table(folder, artifacts.ITEM_STATS).set_index(["dataset", "item_id"])


def test_text_solvable_questions_are_flagged_blind_solvable(run):
    folder, _ = run
    stats = _flags(folder).loc["quiz"]
    giveaway = stats.index.str.endswith("giveaway")
    assert stats.loc[giveaway, "blind_solvable"].mean() >= 0.9  # the reader learns "correct"
    assert stats.loc[~giveaway, "blind_solvable"].sum() <= 2  # and nothing from plain shades
    assert stats.loc[giveaway, "p_blind"].min() > audits.BLIND_FLAG
    table = quality.read_table(folder, "items/blind.csv")
    every = table[(table["dataset"] == "quiz") & (table["type"] == "all types")].iloc[0]
    assert every["n"] == 2 * N_IMAGES and every["blind"] > every["chance"] == 0.25


def test_a_dataset_too_small_for_folds_is_said_not_raised(run):
    folder, _ = run
    said = {d["dataset"]: d["said"] for d in quality.read_summary(folder)["datasets"]}
    assert any("too few images (n = 2 < 10)" in s for s in said["other"])
    assert any(s.startswith("blind reader (linear, 5 folds by image): ") for s in said["quiz"])
    assert (folder / artifacts.ANALYZE / "items/figures/blind_probability.png").is_file()


def test_a_copied_image_is_flagged_in_both_datasets(run):
    folder, _ = run
    stats = _flags(folder)
    leaked = set(stats.index[stats["leaked_image"] == 1])
    assert leaked == {("quiz", "quiz-0-giveaway"), ("quiz", COPIED), ("other", "other-copy")}
    repeated = set(stats.index[stats["repeated_question"] == 1])
    assert repeated == {("quiz", COPIED), ("other", "other-copy")}
    pairs = quality.read_table(folder, "items/leaks.csv")
    assert pairs[["dataset_a", "dataset_b", "scope", "kind"]].values.tolist() == [
        ["quiz", "other", "across", "mirrored"]
    ] or pairs[["dataset_a", "dataset_b", "scope", "kind"]].values.tolist() == [
        ["other", "quiz", "across", "mirrored"]
    ]
    said = {d["dataset"]: d["said"] for d in quality.read_summary(folder)["datasets"]}
    assert any("1 of its images have a copy in another dataset" in s for s in said["other"])


def test_a_changed_dataset_is_said_and_not_read(run):
    folder, _ = run
    bank = quality.gather([folder])
    bank.loc[bank["dataset"] == "other", "digest"] = "not-its-digest"
    found = audits.leaks(bank)
    assert "changed since it was evaluated" in found.said[("other", "not-its-digest")]
    assert "other" not in set(found.flags.index.get_level_values("dataset"))
    assert not found.flags["leaked_image"].any()  # quiz alone holds no copy of another's image


def test_the_report_shows_a_copied_image_pair_side_by_side(run):
    """The report's item-quality section puts the two images of a leak pair side by side."""
    from lib.pages import items_view

    folder, _ = run
    leaks = items_view.section(folder)["leaks"]
    assert leaks["total"] == 1 and leaks["more"] == 0
    (pair,) = leaks["rows"]
    assert pair["kind"] == "mirrored" and all(pair["images"])  # both thumbnails embedded
    assert set(pair["datasets"].split(" · ")) == {"quiz", "other"}
