"""YesBut's release as its repository lays it out: the stage-2 annotation CSV, the file names of the
stage-3/4 restylings (``{ts}_{L}_YES_{R}_BUT.jpg``) and their folders
(``yesbut_stage_{3,4}_{satirical,non_satirical}``), and the stage an image comes from by its name.

Stage 01 (:func:`lib.families.yesbut.collect.collect_yesbut`) walks the repository with these; stage 07 reads the
annotations for the paper's figures (:mod:`lib.families.yesbut.paper`).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

PANEL_STYLES = ("ORIG", "STICK", "3D")
ANNOTATIONS_CSV = (
    "YesBut_Stage2_Annotation.csv"  # the stage-2 annotations, at the repository's root
)
_YESBUT_NAME = re.compile(
    r"^(?P<ts>.+?)_(?P<left>ORIG|STICK|3D)_YES_(?P<right>ORIG|STICK|3D)_BUT\.\w+$"
)
_YESBUT_FOLDER = re.compile(r"yesbut_stage_(?P<stage>\d)_(?P<label>satirical|non_satirical)$")
_HALF_STYLES = re.compile(r"_(ORIG|STICK|3D)_YES_(ORIG|STICK|3D)_BUT\.\w+$")


def read_yesbut_annotations(csv_path: str | Path) -> dict[str, dict]:
    """YesBut_Stage2_Annotation.csv rows by file name, with typed fields."""
    out = {}
    with open(csv_path, newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f), start=2):
            if not row.get("filename"):
                raise ValueError(f"{csv_path}: line {n} has no filename")
            out[row["filename"]] = {
                "left_description": row["left_image"],
                "right_description": row["right_image"],
                "overall_description": row["overall_description"],
                "text_in_left": row["is_text_in_left_image"].strip().upper() == "TRUE",
                "text_in_right": row["is_text_in_right_image"].strip().upper() == "TRUE",
                "connected": row["are_images_connected"].strip().upper() == "TRUE",
                "difficulty": row["difficulty_in_understanding"].strip().upper() or None,
            }
    return out


def parse_yesbut_name(name: str) -> dict | None:
    """``{timestamp, left_style, right_style}`` from ``{ts}_{L}_YES_{R}_BUT.jpg``; None otherwise.
    The "timestamp" is the stage-2 original's file stem (usually a timestamp, sometimes a screenshot name)."""
    m = _YESBUT_NAME.match(name)
    return {"timestamp": m["ts"], "left_style": m["left"], "right_style": m["right"]} if m else None


def parse_stage_folder(name: str) -> dict | None:
    """``{stage, label}`` of a restylings folder ``yesbut_stage_{3,4}_{satirical,non_satirical}``; None otherwise."""
    m = _YESBUT_FOLDER.search(name)
    return {"stage": int(m["stage"]), "label": m["label"]} if m else None


def yesbut_stage(filename: str) -> int:
    """The YesBut stage an image comes from, by its file name: an original (stage 2) names no half
    styles; stage 3 combines originals with 2D stick halves, stage 4 adds 3D ones (sections 3.3-3.4)."""
    m = _HALF_STYLES.search(filename)
    return 2 if m is None else 4 if "3D" in m.groups() else 3
