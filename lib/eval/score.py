"""Reading and scoring answers, with no model: each answer read by its task (:func:`read_answer`),
a group's answers (one model, dataset, task and style) scored by its task's
:class:`lib.tasks.Scorer`, and the group's rows of ``metrics.csv``, ``levels.csv`` and
``errors.csv`` (:func:`group_tables`). A rescore feeds the scorer a chunk at a time from files
(:mod:`lib.eval.rescore`); training's validation scores its answers whole (:func:`score_group`);
both are the same scorer and the same reading."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from lib import artifacts as A
from lib.io import read_jsonl, share_strings
from lib.schema import ERROR, Item, Judgement, Prediction, Response, is_constrained
from lib.tasks import Scorer, Scoring, metric_row

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
LEVEL_COLUMNS = [
    "dataset",
    "style",
    "model",
    "level",
    "concepts",
    "concept",
    "type",
    "subgroup",
    "form",
    "n",
    "correct",
    "accuracy",
    "passed",
]
ERROR_COLUMNS = [
    "dataset",
    "style",
    "model",
    "filter",
    "unit",
    "category",
    "count",
    "share",
    "correct",
    "accuracy",
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
    if resp.problem:  # why a reply was unreadable or cut (lib.answers), kept beside the raw text
        meta["problem"] = resp.problem
    return {"parsed": task.jsonable(parsed), "method": method, "valid": valid, "meta": meta}


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
            p.parsed = task.jsonable(parsed)


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


def judged(p: Prediction, j: Judgement) -> tuple:
    """What a LAVE row needs of one judged answer: its score (an unread rating counts as 0, so the
    judge's failures stay visible), whether it was read, the reference reading, truncation."""
    return (
        (j.score if j.valid else 0.0),
        bool(j.valid),
        j.meta.get("score_reference"),
        bool(p.truncated),
    )


def judgements_by_answer(judgements: list[Judgement]) -> dict:
    """LAVE judgements by the answer they rate: (model, dataset, item id, style)."""
    return {
        (j.model, j.meta.get("dataset", ""), j.item_id, j.meta.get("style", "zero_shot")): j
        for j in judgements
    }


def lave_rows(rated: list[tuple], clusters, scoring) -> list[dict]:
    """The ``lave`` row of a group's judged answers (:func:`judged` and each one's position in the
    group, whose cluster its interval resamples) and, where every judgement kept it, the
    ``lave_reference`` row (the reference implementation's reading: unread ratings are 2)."""
    if not rated:
        return []
    cut, at = sum(t for *_, t, _ in rated), clusters[[i for *_, i in rated]]
    scores, ref = [s for s, *_ in rated], [r for _, _, r, *_ in rated]
    n_inv = sum(not v for _, v, *_ in rated)
    rows = [
        metric_row(
            "all", "lave", scores, len(rated), n_inv, scoring=scoring, n_truncated=cut, clusters=at
        )
    ]
    if all(x is not None for x in ref):
        rows.append(
            metric_row(
                "all",
                "lave_reference",
                ref,
                len(rated),
                0,
                scoring=scoring,
                n_truncated=cut,
                clusters=at,
            )
        )
    return rows


def group_tables(key: tuple, scorer, rated: list[tuple], scoring) -> tuple[list[dict], list, list]:
    """A scored group's metric rows (``invalid_rate``, its task's, LAVE where answers were judged:
    :func:`judged` of each answer judged and its position in the group) and its level and error
    frames (a list of none or one each); intervals resample the answers' clusters (images)."""
    model, dataset, _, style = key
    head = dict(zip(("model", "dataset", "task", "style"), key))
    invalid = 1.0 - np.frombuffer(scorer.valid, dtype=bool).astype(float)
    n, n_inv, n_cut = (
        len(invalid),
        int(invalid.sum()),
        int(np.frombuffer(scorer.truncated, dtype=bool).sum()),
    )
    clusters = scorer.clusters.codes()
    rows = [
        {
            **head,
            **metric_row(
                "all",
                "invalid_rate",
                invalid,
                n,
                n_inv,
                n_truncated=n_cut,
                scoring=scoring,
                clusters=clusters,
            ),
        }
    ]
    own = scorer.tables()
    rows.extend({**head, **r} for r in own.rows)
    rows.extend({**head, **r} for r in lave_rows(rated, clusters, scoring))
    frames = []
    for df in (own.levels, own.errors):
        if df is not None:
            df = df.copy()
            df.insert(0, "style", style)
            df.insert(0, "dataset", dataset)
            df["model"] = model
        frames.append(df)
    return (
        rows,
        frames[:1] if frames[0] is not None else [],
        frames[1:] if frames[1] is not None else [],
    )


def tables(parts: list[tuple]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """metrics, levels and errors from every group's :func:`group_tables`, groups in key order."""
    rows = [r for part in parts for r in part[0]]
    level_frames = [f for part in parts for f in part[1]]
    error_frames = [f for part in parts for f in part[2]]
    metrics = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    levels = (
        pd.concat(level_frames, ignore_index=True)
        if level_frames
        else pd.DataFrame(columns=LEVEL_COLUMNS)
    )
    errors = (
        pd.concat(error_frames, ignore_index=True)
        if error_frames
        else pd.DataFrame(columns=ERROR_COLUMNS)
    )
    return metrics, levels, errors


def read_judgements(out: Path) -> list[Judgement]:
    """An evaluation folder's LAVE judgements (none when it has no judge)."""
    path = out / A.JUDGEMENTS
    return (
        [Judgement.from_dict(share_strings(d, Judgement.REPEATED)) for d in read_jsonl(path)]
        if path.exists()
        else []
    )


def invalid_summary(out: str | Path) -> pd.DataFrame:
    """Invalid and truncated answers per model, task and style: counts, total, rate and the methods
    that read the rest."""
    rows = defaultdict(lambda: defaultdict(int))
    for d in read_jsonl(Path(out) / A.PREDICTIONS):
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
    ).fillna(0)
    df["invalid_rate"] = df["invalid"] / df["n"]
    return df
