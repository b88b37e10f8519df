"""Reading and scoring answers, with no model: each answer read by its task (:func:`read_answer`),
a group's answers (one model, dataset, task and style) scored by its task's
:class:`lib.tasks.Scorer`, and the group's rows of ``metrics.csv`` and of the score tables its
family declares (:func:`group_tables`). A rescore feeds the scorer a chunk at a time from files
(:mod:`lib.eval.rescore`); training's validation scores its answers whole (:func:`score_group`);
both are the same scorer and the same reading."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from lib.core.schema import ERROR, Item, Judgement, Prediction, Response, is_constrained
from lib.io import artifacts, read_jsonl, share_strings
from lib.tasks import Scorer, Scoring, metric_row
from lib.tasks.registry import get_judge, registry

METRIC_COLUMNS = [
    "model",
    "dataset",
    "task",
    "style",
    "subset",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "n_clusters",  # what ci_low / ci_high resampled: the answers' clusters (images), not the answers
    "n_invalid",
    "n_truncated",
]


def read_answer(task, item: Item, resp: Response, reasoning: Response | None = None) -> dict:
    """A reply as its task reads it: the Prediction fields ``parsed`` (as stored), ``method``,
    ``valid`` and ``meta`` (the reasoning of a two-call style, why a call failed, why a reply was
    unreadable or cut). A failed call - the answer's or its reasoning's - has no answer."""
    meta = {}
    if reasoning is not None:
        meta["reasoning"] = reasoning.text
    error = (reasoning.error if reasoning is not None else None) or resp.error
    if error:
        parsed, method, valid = None, ERROR, False
        meta["error"] = error
    else:
        parsed, method, valid = task.read_response(item, resp)
    if (
        resp.problem
    ):  # why a reply was unreadable or cut (lib.core.answers), kept beside the raw text
        meta["problem"] = resp.problem
    return {"parsed": task.reader.jsonable(parsed), "method": method, "valid": valid, "meta": meta}


def groups(preds: list[Prediction]) -> dict[tuple, list[Prediction]]:
    """Predictions by (model, dataset, task, style): the unit every score and table is made for."""
    out = defaultdict(list)
    for p in preds:
        out[(p.model, p.dataset, p.task, p.style)].append(p)
    return out


def reread(task, group: list[Prediction], items) -> None:
    """Read every stored free-text answer of a group again (a parser fix applies on rescoring)."""
    for p, it in zip(group, items):
        if p.method != ERROR and not is_constrained(p.method):
            parsed, p.method, p.valid = task.read_response(it, Response(text=p.raw, method="free"))
            p.parsed = task.reader.jsonable(parsed)


def score_group(task, preds: list[Prediction], items: list[Item], scoring: Scoring) -> Scorer:
    """Score a whole group held in memory (answers already read) as a rescore does a chunk at a
    time: ``correct`` and ``scores`` of every prediction filled in place; returns the scorer (its
    :meth:`~lib.tasks.Scorer.tables` are the group's)."""
    scorer = task.scorer(scoring)
    scorer.add(preds, items)
    preds[:] = [scorer.score(p) for p in preds]
    for i, scores in scorer.corrections().items():
        preds[i].scores = scores
    return scorer


def judgements_by_answer(judgements: list[Judgement]) -> dict:
    """Judgements by the answer they rate: (model, dataset, item id, style)."""
    return {
        (j.model, j.meta.get("dataset", ""), j.item_id, j.meta.get("style", "zero_shot")): j
        for j in judgements
    }


def judge_rows(key: tuple, scorer, rated: list[tuple], scoring) -> list[dict]:
    """The judge's rows of a group's judged answers (each judgement, whether its answer was cut
    off, and its position in the group, whose cluster its interval resamples): the judge its task's
    options name (``tasks.<task>.judge``)."""
    if not rated:
        return []
    name = scoring.of(scorer.task).judge
    if name is None:
        raise ValueError(f"{key}: answers were judged but tasks.{key[2]}.judge names no judge")
    clusters = scorer.clusters.codes()[[i for *_, i in rated]]
    return get_judge(name, f"tasks.{key[2]}.judge").rows(
        [(j, cut) for j, cut, _ in rated], clusters, scoring
    )


def group_tables(key: tuple, scorer, rated: list[tuple], scoring) -> tuple[list[dict], dict]:
    """A scored group's metric rows (``invalid_rate``, its task's, its judge's where answers were
    judged: :func:`judge_rows`) and its score tables by name with the group's dataset, style and
    model; intervals resample the answers' clusters (images)."""
    model, dataset, _, style = key
    head = dict(zip(("model", "dataset", "task", "style"), key))
    invalid = 1.0 - np.frombuffer(scorer.valid, dtype=bool).astype(float)
    n, n_inv = len(invalid), int(invalid.sum())
    n_cut = int(np.frombuffer(scorer.truncated, dtype=bool).sum())
    row = metric_row(
        "all",
        "invalid_rate",
        invalid,
        n,
        n_inv,
        n_truncated=n_cut,
        scoring=scoring,
        clusters=scorer.clusters.codes(),
    )
    own = scorer.tables()
    rows = [{**head, **r} for r in (row, *own.rows, *judge_rows(key, scorer, rated, scoring))]
    frames = {}
    for name, df in own.tables.items():
        df = df.copy()
        df.insert(0, "style", style)
        df.insert(0, "dataset", dataset)
        df["model"] = model
        frames[name] = df
    return rows, frames


def tables(parts: list[tuple]) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """``metrics.csv`` and every declared score table (:mod:`lib.tasks.registry`, written whether
    or not a group filled it, so a run's folder always has the same files) from every group's
    :func:`group_tables`, groups in key order."""
    metrics = pd.DataFrame([r for rows, _ in parts for r in rows], columns=METRIC_COLUMNS)
    made = {}
    for name, columns in registry().score_tables.items():
        frames = [f[name] for _, f in parts if name in f]
        made[name] = (
            pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
        )
    return metrics, made


def read_judgements(out: Path) -> list[Judgement]:
    """An evaluation folder's judgements (none when it has no judge)."""
    path = out / artifacts.JUDGEMENTS
    return (
        [Judgement.from_dict(share_strings(d, Judgement.REPEATED)) for d in read_jsonl(path)]
        if path.exists()
        else []
    )


def invalid_summary(out: str | Path) -> pd.DataFrame:
    """Invalid and truncated answers per model, task and style: counts, total, rate and the methods
    that read the rest."""
    rows = defaultdict(lambda: defaultdict(int))
    for d in read_jsonl(Path(out) / artifacts.PREDICTIONS):
        key = (d["model"], d.get("dataset", d["meta"].get("dataset", "")), d["task"], d["style"])
        rows[key]["n"] += 1
        rows[key]["invalid"] += not d["valid"]
        rows[key]["truncated"] += bool(d.get("truncated"))
        rows[key][f"method {d['method']}"] += 1
    df = pd.DataFrame(
        [
            {"model": k[0], "dataset": k[1], "task": k[2], "style": k[3], **v}
            for k, v in rows.items()
        ]
    )
    counts = [c for c in df.columns if c not in ("model", "dataset", "task", "style")]
    df[counts] = df[counts].fillna(0).astype(int)  # a method no answer of a group used: 0 of them
    df["invalid_rate"] = df["invalid"] / df["n"]
    return df
