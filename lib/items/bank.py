"""The item bank: every answer of every model, style and run, pooled per item, in one Parquet file.

An item is ``(dataset, digest, item_id)``: the dataset's name, the SHA-256 its evaluation recorded
for it (``06_evaluate/manifest.json``, under ``datasets``) and the item's id. A dataset rebuilt
with other questions has another digest, so its items are new items, never pooled with the old
ones (a question reworded after review must not inherit the old wording's answers). A respondent
is ``(run, model, style)``: each run of stage 06 (a seed, a profile) answers as a respondent of
its own.

One row per item and respondent (:data:`COLUMNS`): the task, ``correct`` (nullable: an answer
no scorer marked right or wrong, e.g. an open answer scored only by text metrics, stays empty),
``valid``, ``answer`` (the parsed answer as canonical JSON, so equal answers compare equal
whatever their type; empty when the answer was unreadable), the evaluation folder it came from
(``source``), and one ``human_<criterion>`` column (1/0) per criterion people rated where the
run's stage 07 held its answers to human labels (``07_analyze/agreement/labels.csv``, whose
``answer_id`` is ``dataset:model:style:item``, as :mod:`lib.rating.labelstudio` names answers).

Parquet, written whole and atomically: a pandas or DuckDB user opens it directly
(``pd.read_parquet``, ``SELECT * FROM 'bank.parquet'``). :func:`append` adds one run's answers,
replacing any rows that run had (appending a run twice, or after rerunning it, never duplicates);
:func:`build` makes the bank of a list of runs from scratch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from lib.io import JSONLError, artifacts, atomic_file, read_jsonl

ITEM = ("dataset", "digest", "item_id")  # an item's identity
RESPONDENT = ("run", "model", "style")  # who answered
COLUMNS = (*ITEM, "task", *RESPONDENT, "correct", "valid", "answer", "source")
HUMAN = "human_"  # prefix of the columns of people's verdicts, one per criterion
# the prediction fields the bank reads, and the types each must have
FIELDS = {
    "item_id": str,
    "dataset": str,
    "task": str,
    "model": str,
    "style": str,
    "valid": bool,
    "correct": (bool, type(None)),
}


class BankError(ValueError):
    """A run or a bank file that cannot be read as answers; the message names the file and key."""


def evaluation_folder(path: str | Path) -> Path:
    """The ``06_evaluate`` folder of a run folder, an evaluation folder or a run name."""
    return artifacts.evaluation_folder(path, BankError)


def run_name(folder: Path) -> str:
    """The run an evaluation folder belongs to: its run folder's name."""
    folder = folder.resolve()
    return folder.parent.name if folder.name == artifacts.EVALUATE else folder.name


def dataset_digests(folder: Path) -> dict[str, str]:
    """Dataset name -> digest, as the evaluation's manifest recorded them."""
    path = folder / artifacts.EVAL_MANIFEST
    try:
        digests = json.loads(path.read_text())["datasets"]
    except FileNotFoundError:
        raise BankError(f"{path}: not found (stage 06 did not finish in {folder})") from None
    except (ValueError, KeyError, TypeError) as e:
        raise BankError(f"{path}: no readable 'datasets' record ({e!r})") from None
    if not isinstance(digests, dict) or not all(isinstance(v, str) for v in digests.values()):
        raise BankError(f"{path}: 'datasets' must map each dataset's name to its digest")
    return digests


def _type_name(kind: type) -> str:
    return "null" if kind is type(None) else kind.__name__


def _checked(path: Path, line: int, row: dict, digests: dict[str, str]) -> dict:
    """The fields of one prediction, each checked; an error names the file, line and key."""
    where = f"{path}: line {line}"
    if not isinstance(row, dict):
        raise BankError(f"{where}: expected a prediction object, got {type(row).__name__}")
    for key, kind in FIELDS.items():
        if key not in row or not isinstance(row[key], kind):
            got = _type_name(type(row[key])) if key in row else "nothing"
            wanted = " or ".join(map(_type_name, kind if isinstance(kind, tuple) else (kind,)))
            raise BankError(f"{where}: key {key!r}: expected {wanted}, got {got}")
    if row["dataset"] not in digests:
        raise BankError(
            f"{where}: key 'dataset': {row['dataset']!r} has no digest in "
            f"{path.parent / artifacts.EVAL_MANIFEST} (datasets there: {', '.join(sorted(digests))})"
        )
    parsed = row.get("parsed")
    answer = None if parsed is None else json.dumps(parsed, sort_keys=True, ensure_ascii=False)
    return {k: row[k] for k in FIELDS} | {"digest": digests[row["dataset"]], "answer": answer}


def run_answers(folder: str | Path, verdicts: bool = True) -> pd.DataFrame:
    """One run's answers as bank rows (:data:`COLUMNS`, plus people's verdicts where there are
    any and ``verdicts`` asks for them: stage 06, writing its own rows, reads no later stage).
    ``folder`` is a run folder or its ``06_evaluate`` folder."""
    folder = evaluation_folder(folder)
    digests, path = dataset_digests(folder), folder / artifacts.PREDICTIONS
    try:
        rows = [_checked(path, n, r, digests) for n, r in enumerate(read_jsonl(path), 1)]
    except JSONLError as e:
        raise BankError(str(e)) from None
    frame = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("run", "source")])
    frame = frame.assign(run=run_name(folder), source=str(folder.resolve()))[list(COLUMNS)]
    frame = frame.astype({"correct": "boolean", "valid": bool})
    twice = frame.duplicated([*ITEM, *RESPONDENT])
    if twice.any():
        key = frame.loc[twice, [*ITEM, "model", "style"]].iloc[0].to_dict()
        raise BankError(f"{path}: one model and style answered an item twice: {key}")
    return _with_verdicts(frame, folder) if verdicts else frame


def _verdicts(folder: Path) -> pd.DataFrame | None:
    """People's verdicts on a run's answers, one ``human_<criterion>`` column each, by answer
    (dataset, model, style, item_id); None when the run's stage 07 held none."""
    path = folder.parent / artifacts.ANALYZE / artifacts.AGREED / "labels.csv"
    if folder.name != artifacts.EVALUATE or not path.is_file():
        return None
    labels = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = {"answer_id", "criterion", "label"} - set(labels.columns)
    if missing:
        raise BankError(f"{path}: no column(s) {sorted(missing)}")
    # labels of a release's own answers (other ids) are about no answer of this run: left out
    parts = labels["answer_id"].str.split(":", n=3, expand=True).reindex(columns=range(4))
    labels[["dataset", "model", "style", "item_id"]] = parts.to_numpy()
    labels = labels.dropna(subset=["item_id"])
    values = pd.to_numeric(labels["label"], errors="coerce")
    if not values.isin([0, 1]).all():
        bad = labels.loc[~values.isin([0, 1]), ["answer_id", "label"]].iloc[0].to_dict()
        raise BankError(f"{path}: a label is 1 or 0, got {bad}")
    labels["label"] = values.astype("Int8")
    wide = labels.pivot_table(
        index=["dataset", "model", "style", "item_id"],
        columns="criterion",
        values="label",
        aggfunc="first",
    )
    return wide.add_prefix(HUMAN).reset_index().rename_axis(columns=None)


def _with_verdicts(frame: pd.DataFrame, folder: Path) -> pd.DataFrame:
    verdicts = _verdicts(folder)
    if verdicts is None:
        return frame
    merged = frame.merge(verdicts, on=["dataset", "model", "style", "item_id"], how="left")
    return merged.astype({c: "Int8" for c in merged.columns if c.startswith(HUMAN)})


def build(eval_folders: Iterable[str | Path]) -> pd.DataFrame:
    """The bank of these runs, made from their stage-06 folders (run folders or ``06_evaluate``
    folders); two folders of one run name are refused (they would answer as one respondent)."""
    frames, seen = [], {}
    for given in eval_folders:
        frame, run = run_answers(given), run_name(evaluation_folder(given))
        if run in seen:
            raise BankError(f"{given}: run {run!r} is given twice (first as {seen[run]})")
        seen[run] = given
        frames.append(frame)
    if not frames:
        raise BankError("no runs given: name at least one run folder or 06_evaluate folder")
    return _ordered(pd.concat(frames, ignore_index=True))


def _ordered(bank: pd.DataFrame) -> pd.DataFrame:
    """The bank's columns in their order (verdicts last), rows sorted by item then respondent."""
    human = sorted(c for c in bank.columns if c.startswith(HUMAN))
    bank = bank[[*COLUMNS, *human]].astype({c: "Int8" for c in human})
    return bank.sort_values([*ITEM, *RESPONDENT], kind="stable").reset_index(drop=True)


def write(bank: pd.DataFrame, path: str | Path) -> Path:
    """Write the bank to ``path`` as Parquet, whole: the file holds the old bank or the new one."""
    path = Path(path)
    with atomic_file(path) as f:
        _ordered(bank).to_parquet(f, index=False)
    return path


def read(path: str | Path) -> pd.DataFrame:
    """The bank at ``path``; a file that is no bank is an error naming it and what it lacks."""
    path = Path(path)
    if not path.is_file():
        raise BankError(f"{path}: no bank there (make one: python -m lib.items build)")
    try:
        bank = pd.read_parquet(path)
    except (OSError, ValueError) as e:
        raise BankError(f"{path}: not a Parquet file ({e})") from None
    missing = [c for c in COLUMNS if c not in bank.columns]
    if missing:
        raise BankError(f"{path}: not an item bank: no column(s) {missing}")
    return bank.astype({"correct": "boolean", "valid": bool})


def append(bank_path: str | Path, eval_folder: str | Path) -> pd.DataFrame:
    """Add one run's answers to the bank at ``bank_path`` (made if absent), replacing the rows that
    run had: appending a run again, or after it was rerun, never duplicates. Returns the bank."""
    new = run_answers(eval_folder)
    bank_path = Path(bank_path)
    if bank_path.exists():
        old = read(bank_path)
        new = pd.concat([old[~old["run"].isin(new["run"].unique())], new], ignore_index=True)
    new = _ordered(new)
    write(new, bank_path)
    return new


def respondent_labels(frame: pd.DataFrame) -> pd.Series:
    """``run:model:style`` of each row: one name per respondent for tables and plots."""
    return frame["run"] + ":" + frame["model"] + ":" + frame["style"]


def responses(bank: pd.DataFrame) -> pd.DataFrame:
    """The scored answers as a matrix: one row per item (:data:`ITEM`), one column per respondent
    (``run:model:style``), 1.0 right, 0.0 wrong, NaN unanswered or unscored."""
    scored = bank[bank["correct"].notna()]
    matrix = scored.assign(
        respondent=respondent_labels(scored), score=scored["correct"].astype(float)
    ).pivot(index=list(ITEM), columns="respondent", values="score")
    return matrix.rename_axis(columns=None)
