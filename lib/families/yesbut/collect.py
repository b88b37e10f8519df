"""Stage 01's YesBut parts (the family's ``SOURCES`` and ``MANIFEST_DATASETS``): the repository's
layout read into records (``{kind: yesbut, path: <clone>}``), each two-panel image's layout
checked, and the evaluation datasets built from the labelled images of the manifest."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from lib.families.yesbut.datasets import yesbut_datasets
from lib.families.yesbut.panels import layout
from lib.families.yesbut.release import (
    ANNOTATIONS_CSV,
    parse_stage_folder,
    parse_yesbut_name,
    read_yesbut_annotations,
)
from lib.io import LoadReport, scan_images
from lib.io.records import Record, records_of
from lib.tasks.collection import Source

LABELS = ("satirical", "non_satirical")


def two_panels(image) -> dict:
    """A two-panel image's ``layout`` (:func:`lib.families.yesbut.panels.layout`): panels found,
    the cut, the evidence; a record of a third panel or none is flagged by stage 01's report."""
    return {"layout": asdict(layout(image))}


def _generated_images(root: Path, licence: str, report: LoadReport) -> list[tuple[Path, dict]]:
    """The images of stages 3 and 4, each with what its folder (label, stage) and its name (the
    timestamp and styles) say; a file whose name does not follow the pattern is skipped."""
    generated = []
    folders = (
        sorted((root / "images" / "stage_3_and_4").glob("yesbut_stage_*"))
        if (root / "images" / "stage_3_and_4").exists()
        else []
    )
    for folder in folders:
        if not (m := parse_stage_folder(folder.name)):
            continue
        paths, rep = scan_images(folder)
        report.skipped.extend(rep.skipped)
        for p in paths:
            parsed = parse_yesbut_name(p.name)
            if parsed is None:
                report.add_skip(str(p), "file name does not follow {ts}_{L}_YES_{R}_BUT")
                continue
            generated.append(
                (p, {"licence": licence, "label": m["label"], "stage": m["stage"], **parsed})
            )
    return generated


def _link_originals(gen: list[Record], by_ts: dict, report: LoadReport) -> None:
    """Each generated record linked to its stage-2 original through the timestamp, sharing its
    annotation; one without an original is kept, with a note."""
    for rec in gen:
        original = by_ts.get(rec.timestamp)
        rec.original = original.id if original else None
        rec.annotation = dict(original.annotation) if original else {}
        if original is None:
            report.notes.append(
                (
                    rec.path,
                    f"its original {rec.timestamp} is not in images/stage_2 (missing, or not "
                    f"an image: a git-lfs pointer?): kept without an original or annotation",
                )
            )


def collect_yesbut(
    root: str | Path, licence: str = "YesBut dataset (see its repository)", progress: bool = True
) -> tuple[list[Record], LoadReport]:
    """The YesBut repository layout: ``images/stage_2/{ts}.jpg`` (originals, satirical, ORIG/ORIG)
    joined with ``YesBut_Stage2_Annotation.csv``, and ``images/stage_3_and_4/yesbut_stage_{3,4}_
    {satirical,non_satirical}/{ts}_{L}_YES_{R}_BUT.jpg`` (label from the folder, styles from the name,
    linked to their original through the timestamp)."""
    root = Path(root)
    annotations = (
        read_yesbut_annotations(root / ANNOTATIONS_CSV) if (root / ANNOTATIONS_CSV).exists() else {}
    )
    stage2, report = scan_images(root / "images" / "stage_2")

    def stage2_extra(p: Path) -> dict:
        return {
            "licence": licence,
            "label": "satirical",
            "left_style": "ORIG",
            "right_style": "ORIG",
            "stage": 2,
            "timestamp": p.stem,
            "annotation": annotations.get(p.name, {}),
        }

    sub = records_of(stage2, "yesbut", report, progress, stage2_extra, check=two_panels)
    by_ts = {r.timestamp: r for r in sub if r.timestamp}
    generated = _generated_images(root, licence, report)
    extras = {str(p): e for p, e in generated}
    gen = records_of(
        [p for p, _ in generated],
        "yesbut",
        report,
        progress,
        lambda p: extras[str(p)],
        desc="collect yesbut stages 3-4",
        check=two_panels,
    )
    _link_originals(gen, by_ts, report)
    report.loaded = len(sub) + len(gen)
    return sub + gen, report


class YesButSource(Source):
    keys = ("path",)

    def collect(self, entry: dict, out: Path, progress: bool) -> tuple[list[Record], LoadReport]:
        return collect_yesbut(entry["path"], progress=progress)


def manifest_datasets(manifest: list[dict], folder_of, seed: int) -> dict[str, Path]:
    """The YesBut dataset (detection, understanding, completion) when the manifest holds labelled
    images (:func:`lib.families.yesbut.datasets.yesbut_datasets`); none otherwise."""
    if not any(r.get("label") in LABELS for r in manifest):
        return {}
    return {"yesbut": yesbut_datasets(manifest, folder_of("yesbut"), seed=seed)}
