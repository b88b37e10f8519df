"""MemeQA's paper tables: the release statistics stated in the paper beside ours from the splits
stage 01 collected (:func:`memeqa_reproduction`), and stage 03's shortcut audit as one row per
dataset and question type (:func:`shortcut_summary`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lib.core.papers import paper_frame
from lib.io import artifacts, load_dataset_info, load_items
from lib.metrics import shortcuts
from lib.tasks.analysis import Analysis

TRAIN_SPLIT = "train"  # the MemeQA release's file (train.json) of its training set


def memeqa_splits(run_folder: str | Path) -> dict[str, list]:
    """Stage 01's MemeQA datasets' items, by the split each was read from (its JSON file's stem)."""
    splits = {}
    for name, folder in artifacts.datasets_of(run_folder, artifacts.COLLECT).items():
        info = load_dataset_info(folder)
        if info.get("name") == "memeqa":
            splits[Path(info.get("provenance", {}).get("json", name)).stem] = load_items(folder)
    return splits


def memeqa_reproduction(run_folder: str | Path) -> pd.DataFrame | None:
    """MemeQA's stated release statistics (papers.yaml) beside ours from the MemeQA splits stage 01
    of the run collected (:func:`memeqa_splits`); None when it collected none."""
    splits = memeqa_splits(run_folder)
    if not splits:
        return None
    ours = {
        "questions": sum(map(len, splits.values())),
        "question_types": len(
            {it.meta.get("specific_type") for items in splits.values() for it in items}
        ),
    }
    if TRAIN_SPLIT in splits:
        ours["train_questions"] = len(splits[TRAIN_SPLIT])
    collected = ", ".join(f"{split} {len(items):,}" for split, items in sorted(splits.items()))
    return paper_frame(
        "MemeQA",
        ours,
        {},
        missing=f"this run collected no {TRAIN_SPLIT} split",
        context=f"this run's MemeQA questions per split: {collected}",
    )


def shortcut_summary(audit: pd.DataFrame) -> pd.DataFrame:
    """Stage 03's shortcut audit (:func:`lib.metrics.shortcuts.audit`, per dataset) as one row per
    dataset and question type: the share of questions each text-only tell answers correctly where
    it fires, the blind baseline's exact-match score and chance beside it; a macro row per dataset."""
    rates = audit.pivot_table(
        index=["dataset", "type"], columns="tell", values="rate", aggfunc="first"
    )
    blind = audit[audit["tell"] == "blind baseline"].set_index(["dataset", "type"])
    tells = [t for t in shortcuts.TELLS if t in rates.columns]
    table = rates[tells].join(
        blind[["rate", "chance", "fired"]].rename(
            columns={"rate": "blind baseline", "fired": "single-answer questions"}
        )
    )
    macro = table.groupby(level="dataset").mean(numeric_only=True)
    macro["single-answer questions"] = table.groupby(level="dataset")[
        "single-answer questions"
    ].sum()
    macro.index = pd.MultiIndex.from_tuples(
        [(d, "macro") for d in macro.index], names=["dataset", "type"]
    )
    out = pd.concat([table, macro]).sort_index(level="dataset", sort_remaining=False).reset_index()
    out["single-answer questions"] = out["single-answer questions"].astype(
        "Int64"
    )  # a count, blank where none
    return out


class MemeQAAnalysis(Analysis):
    """Stage 07's MemeQA parts: the shortcut audit's table (stage 03) and the release statistics
    beside the paper's (stage 01's MemeQA splits)."""

    def tables(self, run_folder: Path, data: str) -> dict[str, pd.DataFrame]:
        audit = artifacts.read_table(run_folder, artifacts.AF, artifacts.SHORTCUTS)
        return (
            {"memeqa_shortcuts": shortcut_summary(audit)}
            if audit is not None and len(audit)
            else {}
        )

    def paper(self, run_folder: Path, data: str) -> pd.DataFrame | None:
        return memeqa_reproduction(run_folder)
