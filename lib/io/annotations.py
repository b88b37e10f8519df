"""Annotations on disk: an append-only JSONL file, read back as tables (:class:`AnnotationStore`)."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from lib.io.jsonl import append_jsonl, read_jsonl
from lib.schema import check_annotation


class AnnotationStore:
    """Append-only annotations in a JSONL file (one row per item, annotator and field); :meth:`latest`
    resolves them. Saved values are checked against :data:`lib.schema.FIELDS`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def save(self, item: str, annotator: str, values: dict, source: str = "human") -> int:
        """Append one row per (non-empty) field, flushed before returning; returns the row count."""
        if not annotator or not str(annotator).strip():
            raise ValueError("an annotation needs an annotator name")
        now = time.time()
        rows = [
            {
                "item": item,
                "annotator": annotator,
                "field": k,
                "value": check_annotation(k, v),
                "source": source,
                "time": now,
            }
            for k, v in values.items()
            if v not in (None, "", [])
        ]
        return append_jsonl(self.path, rows) if rows else 0

    def rows(self) -> pd.DataFrame:
        cols = ["item", "annotator", "field", "value", "source", "time"]
        if not self.path.exists():
            return pd.DataFrame(columns=cols)
        return pd.DataFrame(list(read_jsonl(self.path)), columns=cols)

    def latest(self, include_machine: bool = False) -> pd.DataFrame:
        """One row per (item, annotator, field): the most recent save (file order breaks time ties)."""
        df = self.rows()
        if not include_machine:
            df = df[df["source"] == "human"]
        return (
            df.reset_index()
            .sort_values(["time", "index"])
            .groupby(["item", "annotator", "field"], as_index=False)
            .last()
            .drop(columns="index")
        )

    def table(self, annotator: str | None = None, include_machine: bool = False) -> pd.DataFrame:
        """Wide table: one row per (item, annotator), one column per field."""
        df = self.latest(include_machine)
        if annotator:
            df = df[df["annotator"] == annotator]
        if df.empty:
            return pd.DataFrame(columns=["item", "annotator"])
        return df.pivot(index=["item", "annotator"], columns="field", values="value").reset_index()
