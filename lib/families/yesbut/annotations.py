"""YesBut's released annotations (``YesBut_Stage2_Annotation.csv``) read by file name."""

from __future__ import annotations

import csv
from pathlib import Path


def read_yesbut_annotations(csv_path: str | Path) -> dict[str, dict]:
    """YesBut_Stage2_Annotation.csv rows by file name, with typed fields."""
    out = {}
    with open(csv_path, newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f), start=2):
            if not row.get("filename"):
                raise ValueError(f"{csv_path}: line {n} has no filename")
            out[row["filename"]] = {
                "left_description": row["left_image"], "right_description": row["right_image"],
                "overall_description": row["overall_description"],
                "text_in_left": row["is_text_in_left_image"].strip().upper() == "TRUE",
                "text_in_right": row["is_text_in_right_image"].strip().upper() == "TRUE",
                "connected": row["are_images_connected"].strip().upper() == "TRUE",
                "difficulty": row["difficulty_in_understanding"].strip().upper() or None}
    return out
