"""Classification and multiple-choice metrics.

Invalid answers stay in every denominator: callers pass them as ``None`` (or any value outside the
labels), so they count as wrong for accuracy and as a miss for F1 - never dropped, never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Hashable, Sequence

import numpy as np

INVALID = "<invalid>"


def _labels(pred: Sequence) -> list:
    return [INVALID if p is None else p for p in pred]


def accuracy(gold: Sequence, pred: Sequence) -> float:
    """Share of exact hits; an invalid (None) prediction is a miss."""
    if len(gold) != len(pred):
        raise ValueError(f"accuracy: {len(gold)} gold labels but {len(pred)} predictions")
    return float(np.mean([g == p for g, p in zip(gold, pred)])) if gold else float("nan")


def binary_f1(gold: Sequence, pred: Sequence, positive: Hashable) -> float:
    """F1 of the ``positive`` class (scikit-learn); invalid predictions are never positive."""
    from sklearn.metrics import f1_score

    return float(f1_score(list(gold), _labels(pred), labels=[positive], average="macro", zero_division=0))


def macro_f1(gold: Sequence, pred: Sequence, labels: Sequence | None = None) -> float:
    """Unweighted mean of per-class F1 over the gold classes (or ``labels``)."""
    from sklearn.metrics import f1_score

    labels = list(labels) if labels is not None else sorted(set(gold), key=str)
    return float(f1_score(list(gold), _labels(pred), labels=labels, average="macro", zero_division=0))


def jaccard(gold: set, pred: set | None) -> float:
    """Partial credit |P & G| / |P | G| for multi-answer items; both empty ("none") = 1; invalid = 0."""
    if pred is None:
        return 0.0
    gold, pred = set(gold), set(pred)
    union = gold | pred
    return 1.0 if not union else len(gold & pred) / len(union)


def mcq_scores(gold: Sequence[Sequence[int]], pred: Sequence[Sequence[int] | None]) -> dict[str, list[float]]:
    """Per-item ``exact`` (same set of options) and ``jaccard`` credit; None = invalid."""
    exact = [float(p is not None and set(p) == set(g)) for g, p in zip(gold, pred)]
    return {"exact": exact, "jaccard": [jaccard(set(g), None if p is None else set(p)) for g, p in zip(gold, pred)]}


def per_type(scores: Sequence[float], types: Sequence[str]) -> dict:
    """Micro average (over items), macro average (over types: MemeQA's headline) and per-type means."""
    groups: dict[str, list[float]] = defaultdict(list)
    for s, t in zip(scores, types):
        groups[t].append(s)
    by_type = {t: float(np.mean(v)) for t, v in sorted(groups.items())}
    return {"micro": float(np.mean(scores)) if len(scores) else float("nan"),
            "macro": float(np.mean(list(by_type.values()))) if by_type else float("nan"), "by_type": by_type}
