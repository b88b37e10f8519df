"""Annotations on disk: an append-only JSONL file, read back as tables (:class:`AnnotationStore`);
and human labels read as a parser with limits (:func:`label_rows`, :func:`check_label`,
:func:`by_raters`): a labels file is read only when it is a regular file of at most
:data:`MAX_LABELS_BYTES` (:func:`read_capped`), every field checked, an error naming the file, the
line and the field (``FILE:LINE: field X: expected ...``)."""

from __future__ import annotations

import io
import json
import stat
import time
from pathlib import Path

import pandas as pd

from lib.core.schema import check_annotation
from lib.io.jsonl import append_jsonl, read_jsonl

# human labels, one row per answer and criterion (lib.agreement.scorers)
LABEL_COLUMNS = ("answer_id", "cluster", "question", "references", "answer", "criterion", "label")
LABEL_VALUES = {"1": 1, "0": 0, "yes": 1, "no": 0, "true": 1, "false": 0}
# A labels file (an export, a CSV or JSONL of labels, a release's file) is read whole: a rating task
# holds an answer, its question and references and a few raters' choices (kilobytes), so a larger
# file is not one (a device, another dump), and reading it would hold it all in memory.
MAX_LABELS_BYTES = 256 * 2**20


class LabelsError(ValueError):
    """A labels file that cannot be read as labels; the message names the file, the row, the field."""


class AnnotationStore:
    """Append-only annotations in a JSONL file (one row per item, annotator and field); :meth:`latest`
    resolves them. Saved values are checked against :data:`lib.core.schema.FIELDS`."""

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


# --- human labels, read with limits ---


def _label(value, where: str) -> int:
    text = str(value).strip().lower()
    if text not in LABEL_VALUES:
        raise LabelsError(
            f"{where}: field label: expected 1/0, yes/no or true/false, got {value!r}"
        )
    return LABEL_VALUES[text]


def _text(value) -> bool:
    """Text that UTF-8 can hold (JSON may carry a lone surrogate, which no CSV can be written with)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _references(value, where: str) -> list[str]:
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise LabelsError(
                f"{where}: field references: expected a JSON list of strings ({e.msg})"
            ) from None
    refs = [value] if isinstance(value, str) else value
    if not isinstance(refs, list) or not refs or not all(_text(r) and r.strip() for r in refs):
        raise LabelsError(
            f"{where}: field references: expected a non-empty string or list of strings, "
            f"got {value!r}"
        )
    return refs


def label_rows(path: Path) -> list[tuple[str, dict]]:
    """(where, row) of a labels file: ``FILE:LINE`` names each row. Not :func:`lib.io.read_jsonl`,
    which yields rows without their line numbers, and every later error names the row's line."""
    if path.suffix not in (".jsonl", ".csv"):
        raise LabelsError(
            f"{path}: labels are a .csv or .jsonl file with columns {', '.join(LABEL_COLUMNS)}"
        )
    data = read_capped(path, "labels")
    if path.suffix == ".csv":
        try:
            frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
        except (ValueError, pd.errors.ParserError) as e:  # not UTF-8, ragged, empty
            raise LabelsError(f"{path}: not a CSV file of labels ({e})") from None
        return [(f"{path}:{i + 2}", row) for i, row in enumerate(frame.to_dict("records"))]
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise LabelsError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    out = []
    for line, text in enumerate(lines, start=1):
        if text.strip():
            try:
                row = json.loads(text)
            except (ValueError, RecursionError) as e:  # not JSON, nesting or digits too deep
                raise LabelsError(f"{path}:{line}: not a JSON line ({e})") from None
            if not isinstance(row, dict):
                raise LabelsError(
                    f"{path}:{line}: expected an object with {', '.join(LABEL_COLUMNS)}"
                )
            out.append((f"{path}:{line}", row))
    return out


def check_label(where: str, row: dict) -> dict:
    """One label row with every field checked (``where: field X: expected ...``)."""
    missing = [c for c in LABEL_COLUMNS if c not in row]
    if missing:
        raise LabelsError(
            f"{where}: missing {', '.join(missing)} (columns: {', '.join(LABEL_COLUMNS)})"
        )
    for c in ("answer_id", "cluster", "question", "answer", "criterion"):
        if not _text(row[c]) or (c != "answer" and not row[c].strip()):
            raise LabelsError(f"{where}: field {c}: expected text, got {row[c]!r}")
    return {
        **{c: row[c] for c in LABEL_COLUMNS},
        "references": _references(row["references"], where),
        "label": _label(row["label"], where),
    }


def labels_file(path: Path) -> int:
    """The size of ``path``, a regular file (a link to one is followed) of at most
    :data:`MAX_LABELS_BYTES`; anything else (a device, a pipe, a folder, a larger file) is refused
    before it is opened."""
    try:
        st = path.stat()
    except OSError as e:
        raise LabelsError(f"{path}: cannot read it ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise LabelsError(f"{path}: not a regular file (a device, a pipe or a folder)")
    if st.st_size > MAX_LABELS_BYTES:
        raise LabelsError(
            f"{path}: larger than {MAX_LABELS_BYTES:,} bytes (lib.io.annotations.MAX_LABELS_BYTES): "
            f"not a labels file"
        )
    return st.st_size


def read_capped(path: Path, what: str) -> bytes:
    """The bytes of a labels file (:func:`labels_file`), never more than the cap."""
    labels_file(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_LABELS_BYTES + 1)
    except OSError as e:
        raise LabelsError(f"{path}: cannot read the {what} ({e.strerror})") from None
    if len(data) > MAX_LABELS_BYTES:
        raise LabelsError(f"{path}: grew past {MAX_LABELS_BYTES:,} bytes while it was read")
    return data


def by_raters(rows: list[dict]) -> tuple[list[dict], dict]:
    """One label row per answer and criterion: where several rows give one (a row per rater, two
    files joined), the majority of their labels, as an export's raters; a tie is left out. Counts
    both (none: ``{}``)."""
    grouped = {}
    for r in rows:
        grouped.setdefault((r["answer_id"], r["criterion"]), []).append(r)
    kept, several, tied = [], 0, 0
    for group in grouped.values():
        yes = sum(r["label"] for r in group)
        several += len(group) > 1
        if 2 * yes == len(group):
            tied += 1
            continue
        kept.append({**group[0], "label": int(2 * yes > len(group))})
    return kept, ({"rated_by_several": several, "tied": tied} if several else {})
