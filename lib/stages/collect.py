"""Stage 01 · Collect: images from folders, the YesBut repository layout, MemeQA JSON, a Hugging
Face dataset, URLs or the embedded demo, into one manifest (one record per image).

A record: ``id`` (``img-`` + the first 16 hex digits of the file's SHA-256, so re-collecting the
same sources gives the same ids and adding images later keeps the existing ones), ``path``,
``sha256``, ``phash`` (perceptual hash, imagehash), ``width``, ``height``, ``source``, ``licence``,
``url``, ``label`` (``satirical`` / ``non_satirical`` where known), ``left_style`` / ``right_style``
(ORIG, STICK, 3D), ``stage``, ``timestamp``, ``original`` (the id of a generated image's stage-2
original) and ``annotation`` (YesBut stage-2 fields joined by file name).

Bad files (empty, truncated, not an image) are reported by name and counted, never ingested.
Duplicates follow one documented rule (:func:`lib.io.duplicates.deduplicate`): exact copies (same
SHA-256) and near copies (a perceptual-hash match confirmed by the pixels of both halves) of an
earlier record are removed and reported with both paths and the evidence; images of different
labels and style variants of one YesBut original never are; "earlier" is the order the sources
were given, then path. A rerun with changed sources rebuilds the manifest from what they give now (ids kept) and
lists what it no longer holds in ``report.json``.

    run(CollectConfig(sources=[{"kind": "demo"}]), out)      # every step, as notebook 01 calls them
    python -m lib.stages.collect --profile real          # -> outputs/real/01_collect

The kinds of source every user has (folder, URLs, a Hugging Face dataset, the demo) are the stage's;
a family adds its own (``SOURCES``, :class:`lib.tasks.collection.Source`: YesBut's repository,
MemeQA's JSON splits) and the datasets it builds from the manifest (``MANIFEST_DATASETS``: YesBut's
sets from labelled images). :mod:`lib.io.records` makes the records, whoever collects them.
"""

from __future__ import annotations

import hashlib
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import matplotlib.cbook
import numpy as np
from PIL import Image
from tqdm.auto import tqdm

from lib import config
from lib.config import cli
from lib.families.yesbut.collect import two_panels
from lib.families.yesbut.demo import demo_pairs
from lib.io import (
    ImageError,
    LoadReport,
    artifacts,
    read_jsonl,
    scan_images,
    write_json,
    write_jsonl,
    write_sample_images,
)
from lib.io.duplicates import deduplicate
from lib.io.records import Record, record_for, records_of
from lib.pages import plots
from lib.tasks.registry import registry

OWN_KINDS = ("demo", "folder", "urls", "hf")  # the sources every user has; families add theirs


def collect_folder(
    folder: str | Path, source: str | None = None, licence: str = "unknown", progress: bool = True
) -> tuple[list[Record], LoadReport]:
    """Every image under ``folder`` (recursive, common formats); bad files go to the report."""
    paths, report = scan_images(folder)
    recs = records_of(
        paths, source or Path(folder).name, report, progress, lambda p: {"licence": licence}
    )
    return recs, report


def collect_urls(
    urls: list[str],
    dest: str | Path,
    retries: int = 3,
    timeout_s: float = 20.0,
    progress: bool = True,
) -> tuple[list[Record], LoadReport]:
    """Download each URL into ``dest`` (retries with backoff). A URL that never succeeds, one that is
    not http(s) (``file://`` included: collection does not read local files through URLs), one
    without a scheme, and one whose download is no image (a soft 404's HTML page) are each reported
    with the reason, and the other URLs are kept. Offline, every URL fails fast and is reported."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    report, recs = LoadReport(), []
    for url in tqdm(urls, desc="download", unit="url", disable=not progress):
        scheme = urllib.parse.urlsplit(str(url)).scheme.lower()
        if scheme not in ("http", "https"):
            report.add_skip(
                url, f"not an http(s) URL ({f'scheme {scheme!r}' if scheme else 'scheme missing'})"
            )
            continue
        name = hashlib.sha256(url.encode()).hexdigest()[:16] + (
            Path(url.split("?")[0]).suffix or ".img"
        )
        target = dest / name
        error = None
        for attempt in range(retries):
            try:
                with urllib.request.urlopen(url, timeout=timeout_s) as r:
                    target.write_bytes(r.read())
                error = None
                break
            except OSError as e:
                error = f"{type(e).__name__}: {e}"
                time.sleep(min(2**attempt * 0.2, 2.0))
        if error:
            report.add_skip(url, f"download failed after {retries} attempts ({error})")
            continue
        try:
            recs.append(record_for(target, "urls", url=url))
        except (OSError, ImageError) as e:
            target.unlink(missing_ok=True)  # not kept: it is no image
            report.add_skip(url, f"downloaded, but not an image ({e})")
    report.loaded = len(recs)
    return recs, report


def collect_hf(
    name: str,
    dest: str | Path,
    split: str = "train",
    image_column: str = "image",
    label_column: str | None = None,
    limit: int | None = None,
    progress: bool = True,
) -> tuple[list[Record], LoadReport]:
    """A Hugging Face dataset's images (``datasets.load_dataset``; needs the network or a prior
    download), saved as PNGs under ``dest``."""
    import datasets  # deferred on purpose: a heavy import that only a Hugging Face source needs

    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as e:  # offline, unknown name, gated...: say which and why
        raise RuntimeError(
            f"cannot load the Hugging Face dataset {name!r} (split {split!r}): {e}. "
            f"It needs the network (HF_HUB_OFFLINE must be unset) or a local copy."
        ) from e
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    report, recs = LoadReport(), []
    for i, row in enumerate(tqdm(ds, desc=f"collect {name}", unit="image", disable=not progress)):
        if limit is not None and i >= limit:
            break
        path = dest / f"{i:06d}.png"
        row[image_column].convert("RGB").save(path)
        recs.append(
            record_for(path, f"hf:{name}", label=str(row[label_column]) if label_column else None)
        )
    report.loaded = len(recs)
    return recs, report


def collect_demo(dest: str | Path, progress: bool = True) -> tuple[list[Record], LoadReport]:
    """The embedded demo: real photographs shipped by scikit-image, scikit-learn and matplotlib, and
    the two-panel images composed from them (:func:`lib.families.yesbut.demo.demo_pairs`)."""
    # deferred on purpose: scikit-learn takes about half a second to import and only the demo needs it
    from sklearn.datasets import load_sample_images

    dest = Path(dest)
    paths = write_sample_images(dest)
    licences = {p: "scikit-image sample data (BSD-3-Clause; see skimage.data)" for p in paths}
    for name, array in zip(("china", "flower"), load_sample_images().images):
        p = dest / f"{name}.png"
        if not p.exists():
            Image.fromarray(np.asarray(array, dtype=np.uint8)).save(p)
        paths.append(p)
        licences[p] = "scikit-learn sample image (CC-BY, see sklearn.datasets.load_sample_images)"
    p = dest / "grace_hopper.png"
    if not p.exists():
        with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
            Image.open(f).convert("RGB").save(p)
    paths.append(p)
    licences[p] = "matplotlib sample data (public domain, US Navy photograph)"
    report = LoadReport()
    photos = records_of(paths, "demo", report, progress, lambda p: {"licence": licences[p]})
    pairs = demo_pairs({Path(p).stem: p for p in paths}, dest / "pairs")
    extra = {str(p): e for p, e in pairs}
    panels = records_of(
        [p for p, _ in pairs],
        "demo-pairs",
        LoadReport(),
        False,
        lambda p: extra[str(p)],
        check=two_panels,
    )
    report.loaded = len(photos) + len(panels)
    return photos + panels, report


def gather(
    source: dict, out: str | Path, progress: bool = False
) -> tuple[list[Record], LoadReport]:
    """One source of notebook 01's ``sources`` list: ``{kind: demo | folder | urls | hf, ...}`` or
    a kind a family reads (:func:`source_kinds`: ``yesbut``, ``memeqa``)."""
    out = Path(out)
    kind = source.get("kind")
    if kind in (families := registry().sources):
        return families[kind].collect(source, out, progress)
    if kind == "demo":
        return collect_demo(out / "images", progress=progress)
    if kind == "folder":
        return collect_folder(
            source["path"], source.get("name"), source.get("licence", "unknown"), progress=progress
        )
    if kind == "urls":
        return collect_urls(source["urls"], out / "downloads", progress=progress)
    if kind == "hf":
        return collect_hf(
            source["name"],
            out / "hf",
            source.get("split", "train"),
            source.get("image_column", "image"),
            source.get("label_column"),
            source.get("limit"),
            progress=progress,
        )
    raise ValueError(f"sources: unknown kind {kind!r} in {source}; use {', '.join(source_kinds())}")


def source_kinds() -> list[str]:
    """Every kind a ``sources`` entry may name: the stage's own, then the families'."""
    return [*OWN_KINDS, *registry().sources]


def merge_manifest(existing: list[dict], new: list[Record]) -> tuple[list[dict], list[dict]]:
    """The manifest of this collection and the records it no longer holds. Records the sources give
    again keep their place and id (ids are content hashes) with their fields as collected now; new
    images are appended; records the sources no longer give are removed and returned, so the
    manifest and its provenance always describe the same collection."""
    now = {r.id: r.to_dict() for r in new}
    manifest = [now[r["id"]] for r in existing if r["id"] in now]
    placed = {r["id"] for r in manifest}
    manifest += [d for i, d in now.items() if i not in placed]
    return manifest, [r for r in existing if r["id"] not in now]


def totals(manifest):
    """Images per stage, label and (left, right) style."""
    m = manifest.copy()
    m["styles"] = m["left_style"].fillna("?") + " | " + m["right_style"].fillna("?")
    return (
        m.groupby(["stage", "label", "styles"], dropna=False).size().rename("images").reset_index()
    )


# --- the stage --------------------------------------------------------------------------------------


@dataclass
class CollectConfig(config.StageConfig):
    """Where the images come from and what counts as a duplicate."""

    STAGE: ClassVar[str] = artifacts.COLLECT

    seed: int = 0  # the completion options' A/B placement in the YesBut dataset; collection is deterministic
    sources: list[dict] = field(
        default_factory=lambda: [{"kind": "demo"}]
    )  # each {kind: demo | folder | urls | hf | a family's kind (yesbut, memeqa), ...}
    near_duplicate_distance: int = (
        4  # perceptual-hash Hamming distance counted as a near copy (0: exact only)
    )
    # build the datasets the families make from the manifest (YesBut's, from labelled two-panel images)
    manifest_datasets: bool = True

    def check(self, source: str) -> None:
        for i, s in enumerate(self.sources):
            if "kind" not in s:
                raise config.ParamsError(
                    f"{source}: sources[{i}] needs a 'kind' ({', '.join(source_kinds())})"
                )
            own = registry().sources.get(s["kind"])
            if own is not None and (missing := [k for k in own.keys if k not in s]):
                raise config.ParamsError(
                    f"{source}: sources[{i}] ({s['kind']}) needs {', '.join(missing)}"
                )


def gather_sources(
    cfg: CollectConfig, out: str | Path, progress: bool = False
) -> tuple[list[Record], dict]:
    """Every source of ``cfg.sources`` in order (:func:`gather`). Returns the records and what the
    sources reported: ``bad_files`` and ``notes`` (one row per file, naming its source) and
    ``per_source`` (images and bad files of each)."""
    records, found = [], {"bad_files": [], "notes": [], "per_source": []}
    for source in cfg.sources:
        recs, report = gather(source, out, progress)
        records += recs
        found["bad_files"] += [
            {"source": source["kind"], "file": f, "reason": why} for f, why in report.skipped
        ]
        found["notes"] += [
            {"source": source["kind"], "file": f, "note": why} for f, why in report.notes
        ]
        found["per_source"].append(
            {"source": source["kind"], "images": len(recs), "bad_files": len(report.skipped)}
        )
    return records, found


def build_manifest(
    cfg: CollectConfig, out: str | Path, records: list[Record], found: dict
) -> tuple[list[dict], dict]:
    """Drop duplicates (:func:`deduplicate`), merge what is left into ``manifest.jsonl`` (existing ids
    kept, :func:`merge_manifest`) and write ``report.json`` (bad files, notes, duplicates, images not
    verified as two panels, records removed since the last collection). Returns the manifest's rows
    and the report."""
    out = Path(out)
    kept, dropped = deduplicate(records, near=cfg.near_duplicate_distance)
    path = out / artifacts.MANIFEST
    manifest, removed = merge_manifest(list(read_jsonl(path)) if path.exists() else [], kept)
    write_jsonl(path, manifest)
    flagged = [
        {"path": r["path"], **r["layout"]}
        for r in manifest
        if r.get("layout") and r["layout"]["panels"] != 2
    ]
    report = {
        "collected": len(records),
        "kept": len(kept),
        "bad_files": found["bad_files"],
        "notes": found["notes"],
        "duplicates": dropped,
        "per_source": found["per_source"],
        "not_verified_two_panels": flagged,
        "removed_since_last_collection": [{"id": r["id"], "path": r["path"]} for r in removed],
    }
    write_json(out / artifacts.COLLECT_REPORT, report)
    return manifest, report


def sample_figure(out: str | Path, manifest: list[dict], n: int = 6):
    """The first ``n`` images of the manifest with their names (``figures/sample``); ``(fig, ax)``."""
    sample = manifest[:n]
    fig, ax = plots.image_grid(
        [Image.open(r["path"]) for r in sample],
        [r["name"] for r in sample],
        cols=3,
        grid_lines=False,
    )
    plots.save(fig, Path(out) / artifacts.FIGURES, "sample", close=True)
    return fig, ax


def datasets(cfg: CollectConfig, out: str | Path, manifest: list[dict]) -> dict[str, Path]:
    """The dataset folders 06 evaluates, under ``datasets/``: each family source's own (a MemeQA
    split's questions, ``memeqa_<json stem>``) and, with ``cfg.manifest_datasets``, those the
    families build from the manifest (YesBut's, when it holds labelled images); name -> folder."""
    folder_of = lambda name: artifacts.dataset_folder(out, name)
    folders, kinds = {}, registry().sources
    for source in cfg.sources:
        if source["kind"] in kinds:
            folders.update(kinds[source["kind"]].datasets(source, folder_of))
    for build in registry().manifest_datasets if cfg.manifest_datasets else ():
        folders.update(build(manifest, folder_of, cfg.seed))
    return folders


def finish(
    cfg: CollectConfig,
    out: str | Path,
    manifest: list[dict],
    report: dict,
    folders: dict[str, Path],
) -> dict:
    """The summary from what the steps returned (:func:`build_manifest`'s manifest and report,
    :func:`datasets`' folders) and provenance."""
    flagged = report["not_verified_two_panels"]
    summary = {
        "collected": report["collected"],
        "kept": report["kept"],
        "duplicates": len(report["duplicates"]),
        "bad_files": len(report["bad_files"]),
        "notes": len(report["notes"]),
        "not_verified_two_panels": len(flagged),
        "three_panels": sum(f["panels"] == 3 for f in flagged),
        "removed_since_last_collection": len(report["removed_since_last_collection"]),
        "manifest": len(manifest),
        "per_source": report["per_source"],
        "datasets": {name: str(folder) for name, folder in folders.items()},
    }
    return config.finish(Path(out), artifacts.COLLECT, cfg, summary)


@config.stage_run
def run(cfg: CollectConfig, out: str | Path, progress: bool = False) -> dict:
    """The stage, step by step as notebook 01 runs it: gather every source, drop duplicates and merge
    into ``manifest.jsonl`` (existing ids kept) with ``report.json``, a sample figure, the MemeQA and
    YesBut datasets, summary and provenance."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records, found = gather_sources(cfg, out, progress)
    manifest, report = build_manifest(cfg, out, records, found)
    sample_figure(out, manifest)
    return finish(cfg, out, manifest, report, datasets(cfg, out, manifest))


if __name__ == "__main__":
    sys.exit(
        cli.main(
            "python -m lib.stages.collect",
            CollectConfig,
            run,
            description="Stage 01: collect images.",
        )
    )
