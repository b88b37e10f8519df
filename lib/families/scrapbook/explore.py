"""Reading a generated Scrapbook folder back for a notebook: scenes, sample questions, previews."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from PIL import Image

from lib.io import read_jsonl


def read_scenes(folder: str | Path) -> list[dict]:
    return list(read_jsonl(Path(folder) / "scenes.jsonl"))


def sample_questions(folder: str | Path, per_cell: int = 1) -> pd.DataFrame:
    """The first ``per_cell`` questions of every (type, group, form), streamed from items.jsonl."""
    taken: dict = {}
    rows = []
    with open(Path(folder) / "items.jsonl", encoding="utf-8") as f:
        for line in f:
            item = json.loads(line)
            m = item["meta"]
            key = (m["type"], m["group"], m["form"])
            if taken.get(key, 0) < per_cell:
                taken[key] = taken.get(key, 0) + 1
                rows.append(
                    {
                        "type": m["type"],
                        "group": m["group"],
                        "subgroup": m["subgroup"],
                        "form": m["form"],
                        "level": m["level"],
                        "question": item["question"],
                        "answer": item["answer"][0],
                        "image": m["image"],
                    }
                )
    return pd.DataFrame(rows).sort_values(["type", "group", "form"]).reset_index(drop=True)


def preview(
    folder: str | Path, scenes: list[dict], n: int = 6
) -> tuple[list[Image.Image], list[str]]:
    """The last image of the first ``n`` units (all objects placed), with short titles."""
    last = {}
    for sc in scenes:
        last[tuple(sc["unit"])] = sc
    chosen = list(last.values())[:n]
    images = [Image.open(Path(folder) / sc["image"]).convert("RGB") for sc in chosen]
    titles = [f"{sc['id']}: main [{sc['relation']}] reference" for sc in chosen]
    return images, titles
