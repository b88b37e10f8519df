"""Classification and multiple-choice metrics.

Invalid answers stay in every denominator: callers pass them as ``None`` (or any value outside the
labels), so they count as wrong for accuracy and as a miss for F1 - never dropped, never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np

_NO_LABEL = "<no answer>"  # what an invalid (None) prediction becomes: never any class


def _labels(pred: Sequence) -> list:
    return [_NO_LABEL if p is None else p for p in pred]


def accuracy(gold: Sequence, pred: Sequence) -> float:
    """Share of exact hits; an invalid (None) prediction is a miss."""
    if len(gold) != len(pred):
        raise ValueError(f"accuracy: {len(gold)} gold labels but {len(pred)} predictions")
    return float(np.mean([g == p for g, p in zip(gold, pred)])) if gold else float("nan")


def binary_f1(gold: Sequence, pred: Sequence, positive: Hashable) -> float:
    """F1 of the ``positive`` class (scikit-learn); invalid predictions are never positive."""
    from sklearn.metrics import f1_score

    return float(
        f1_score(list(gold), _labels(pred), labels=[positive], average="macro", zero_division=0)
    )


def macro_f1(gold: Sequence, pred: Sequence, labels: Sequence | None = None) -> float:
    """Unweighted mean of per-class F1 over the gold classes (or ``labels``)."""
    from sklearn.metrics import f1_score

    labels = list(labels) if labels is not None else sorted(set(gold), key=str)
    return float(
        f1_score(list(gold), _labels(pred), labels=labels, average="macro", zero_division=0)
    )


def jaccard(gold: set, pred: set | None) -> float:
    """Partial credit |P & G| / |P | G| for multi-answer items; both empty ("none") = 1; invalid = 0."""
    if pred is None:
        return 0.0
    gold, pred = set(gold), set(pred)
    union = gold | pred
    return 1.0 if not union else len(gold & pred) / len(union)


def mcq_scores(
    gold: Sequence[Sequence[int]], pred: Sequence[Sequence[int] | None]
) -> dict[str, list[float]]:
    """Per-item ``exact`` (same set of options) and ``jaccard`` credit; None = invalid."""
    exact = [float(p is not None and set(p) == set(g)) for g, p in zip(gold, pred)]
    return {
        "exact": exact,
        "jaccard": [jaccard(set(g), None if p is None else set(p)) for g, p in zip(gold, pred)],
    }


# --- vectorised statistics for lib.metrics.stats.bootstrap_ci (last axis = items) ---------------


def f1_statistic(gold: Sequence, pred: Sequence, labels: Sequence):
    """A vectorised macro F1 over ``labels`` (one label: that class's F1) for bootstrap intervals;
    invalid predictions (None) are never any label. Equals :func:`macro_f1` / :func:`binary_f1`."""
    g = np.asarray(["\0" if x is None else str(x) for x in gold])
    p = np.asarray([_NO_LABEL if x is None else str(x) for x in pred])
    parts = [
        (
            (g == str(lb)) & (p == str(lb)),
            (g != str(lb)) & (p == str(lb)),
            (g == str(lb)) & (p != str(lb)),
        )
        for lb in labels
    ]
    flat = [x.astype(np.int8) for trio in parts for x in trio]

    def stat(*arrays):
        f1s = []
        for k in range(len(labels)):
            tp, fp, fn = (arrays[3 * k + j].sum(axis=-1) for j in range(3))
            denom = 2 * tp + fp + fn
            f1s.append(np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0))
        return np.mean(f1s, axis=0)

    return stat, flat


def macro_over_types_statistic(scores: Sequence[float], types: Sequence[str]):
    """A vectorised mean over question types of the per-type mean score (MemeQA's macro average)."""
    values = np.asarray(scores, dtype=float)
    names = sorted(set(types))
    masks = [(np.asarray(types) == t).astype(float) for t in names]

    def stat(v, *ms):
        means = [
            np.where(
                m.sum(axis=-1) > 0, (v * m).sum(axis=-1) / np.maximum(m.sum(axis=-1), 1), np.nan
            )
            for m in ms
        ]
        return np.nanmean(means, axis=0)

    return stat, [values, *masks]


def per_type(scores: Sequence[float], types: Sequence[str]) -> dict:
    """Micro average (over items), macro average (over types: MemeQA's headline) and per-type means."""
    groups: dict[str, list[float]] = defaultdict(list)
    for s, t in zip(scores, types):
        groups[t].append(s)
    by_type = {t: float(np.mean(v)) for t, v in sorted(groups.items())}
    return {
        "micro": float(np.mean(scores)) if len(scores) else float("nan"),
        "macro": float(np.mean(list(by_type.values()))) if by_type else float("nan"),
        "by_type": by_type,
    }
