"""How well a scorer (a text metric or an LLM judge) agrees with people, family-neutral.

For each human criterion (a 0/1 verdict per answer, e.g. "the description is correct"):

- a *graded* score (BLEU, ROUGE-L, BERTScore, a judge's 0 / 0.5 / 1) is held to the verdicts by
  ROC AUC (the chance that a right answer outscores a wrong one, from ranks; equal to
  scikit-learn's) and Kendall's tau-b (scipy: rank agreement with ties, as the LAVE seed reports
  it);
- a *categorical* score (a judge's "correct or not", a threshold on a metric) by Cohen's kappa
  (scikit-learn) and Krippendorff's alpha (the ``krippendorff`` package, nominal).

Every figure has a bootstrap interval that resamples clusters (the image: several answers about
one image share its difficulty, :mod:`lib.metrics.stats`), and :func:`paired_agreement` gives the
interval of "scorer A agrees with people better than scorer B", both scorers resampled together.
A resample where a statistic is undefined (one class only) is left out of its interval, so an
interval over answers of which fewer than :data:`MIN_PER_CLASS` are labelled yes (or no) comes from
the resamples that happened to draw them: each row counts both classes (``n_positive``,
``n_negative``) for a table to flag it, and a statistic with no value says why (``note``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from lib.metrics.stats import (
    CONFIDENCE,
    N_RESAMPLES,
    cluster_resamples,
    codes_of,
    n_clusters,
    percentile_bounds,
)

GRADED = ("roc_auc", "kendall_tau_b")
CATEGORICAL = ("cohen_kappa", "krippendorff_alpha")
# An interval needs both classes in most resamples: with k answers of a class among many images, about
# e^-k of the cluster resamples draw none and are dropped, so below this count the interval describes
# only the resamples that drew them, and a table flags it (as it flags too few images).
MIN_PER_CLASS = 5


def why_undefined(scores: np.ndarray, labels: np.ndarray) -> str:
    """Why a statistic of ``scores`` against 0/1 ``labels`` has no value, in words."""
    if len(labels) < 2:
        return f"{('no answer', 'one answer only')[len(labels)]} both scored and labelled"
    if not (labels == 1).any():
        return "no positive label: people judged every answer no"
    if not (labels == 0).any():
        return "no negative label: people judged every answer yes"
    if len(np.unique(scores)) < 2:
        return "the scorer gave every answer the same score"
    return "undefined on these answers"


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """P(a right answer's score > a wrong one's), ties counted half; NaN with one class only.

    Computed from ranks (the Mann-Whitney U statistic over n_right * n_wrong), not with
    scikit-learn's ``roc_auc_score``: the same value (a test holds them equal, ties included) in
    about a twentieth of the time, which the thousands of resamples per scorer and pair need."""
    from scipy.stats import rankdata

    right = np.asarray(labels).astype(bool)
    n_right = int(right.sum())
    n_wrong = len(right) - n_right
    if not n_right or not n_wrong:
        return math.nan
    rank_sum = float(rankdata(scores)[right].sum())
    return (rank_sum - n_right * (n_right + 1) / 2) / (n_right * n_wrong)


def kendall_tau_b(scores: np.ndarray, labels: np.ndarray) -> float:
    """Kendall's tau-b between scores and verdicts (ties in both corrected); NaN when either is constant."""
    from scipy.stats import kendalltau

    if len(set(np.asarray(scores).tolist())) < 2 or len(set(np.asarray(labels).tolist())) < 2:
        return math.nan
    return float(kendalltau(scores, labels, variant="b").statistic)


def cohen_kappa(scores: np.ndarray, labels: np.ndarray) -> float:
    """Cohen's kappa of two categorical ratings; NaN when both are one and the same constant."""
    from sklearn.metrics import cohen_kappa_score

    value = cohen_kappa_score(np.asarray(labels), np.asarray(scores))
    return float(value) if np.isfinite(value) else math.nan


def krippendorff_alpha(scores: np.ndarray, labels: np.ndarray) -> float:
    """Krippendorff's alpha (nominal) of the two raters; NaN when no disagreement is possible."""
    import krippendorff

    data = np.vstack([np.asarray(labels, dtype=float), np.asarray(scores, dtype=float)])
    if len(np.unique(data)) < 2:
        return math.nan
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


STATISTICS: dict[str, Callable] = {
    "roc_auc": roc_auc,
    "kendall_tau_b": kendall_tau_b,
    "cohen_kappa": cohen_kappa,
    "krippendorff_alpha": krippendorff_alpha,
}


def _interval(
    statistic: Callable,
    arrays: list[np.ndarray],
    clusters,
    n_resamples: int,
    confidence: float,
    seed: int,
) -> tuple[float, float, float]:
    """(value, low, high) of ``statistic(*arrays)`` over cluster resamples, those where it is
    undefined (NaN) left out; NaN bounds when fewer than two remain."""
    if len(arrays[0]) < 2:  # nothing to agree on (a judge none of whose ratings could be read)
        return math.nan, math.nan, math.nan
    value = float(statistic(*arrays))
    if math.isnan(value):
        return value, math.nan, math.nan
    codes = codes_of(clusters, len(arrays[0]))
    draws = np.array(
        [
            statistic(*(a[idx] for a in arrays))
            for idx in cluster_resamples(codes, n_resamples, seed)
        ],
        dtype=float,
    )
    draws = draws[np.isfinite(draws)]
    if len(draws) < 2:
        return value, math.nan, math.nan
    return (value, *percentile_bounds(draws, confidence))


def agreement(
    scores: Sequence[float],
    labels: Sequence,
    clusters: Sequence | None = None,
    statistics: Sequence[str] = GRADED,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> list[dict]:
    """One row per statistic: ``statistic, value, ci_low, ci_high, n, n_clusters, n_positive,
    n_negative, note`` of a scorer's ``scores`` against people's 0/1 ``labels`` (one per answer;
    ``clusters``: each answer's image); ``note`` says why a value is missing, else is empty."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=float)
    if len(s) != len(y):
        raise ValueError(f"agreement: {len(s)} scores for {len(y)} labels")
    rows = []
    for name in statistics:
        value, low, high = _interval(
            STATISTICS[name], [s, y], clusters, n_resamples, confidence, seed
        )
        rows.append(
            {
                "statistic": name,
                "value": value,
                "ci_low": low,
                "ci_high": high,
                "n": len(s),
                "n_clusters": n_clusters(clusters, len(s)),
                "n_positive": int((y == 1).sum()),
                "n_negative": int((y == 0).sum()),
                "note": why_undefined(s, y) if math.isnan(value) else "",
            }
        )
    return rows


def paired_agreement(
    scores_a: Sequence[float],
    scores_b: Sequence[float],
    labels: Sequence,
    clusters: Sequence | None = None,
    statistic: str = "roc_auc",
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(A's agreement - B's, low, high): both scorers resampled on the same clusters, so an interval
    above zero says A agrees with people better than B on these answers."""
    f = STATISTICS[statistic]
    arrays = [
        np.asarray(scores_a, dtype=float),
        np.asarray(scores_b, dtype=float),
        np.asarray(labels, dtype=float),
    ]
    return _interval(
        lambda a, b, y: f(a, y) - f(b, y), arrays, clusters, n_resamples, confidence, seed
    )
