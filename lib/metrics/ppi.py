"""A judge's accuracy corrected by people: prediction-powered inference (PPI) of a mean.

A judge scores every answer; people judge a few of them (the labelled answers). The judge's mean
alone is off by however much the judge errs one way; people's mean alone rests on the few they
judged. PPI (Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, "Prediction-powered inference",
Science 382, 2023) takes the judge's mean over the unlabelled answers plus the mean of
people's verdict minus the judge's score over the labelled ones: unbiased whatever the judge,
and narrower than people's mean alone as far as the judge agrees with them (wider where it does
not: the labels then pay for the judge's noise).

:func:`ppi_mean_ci` is by default the paper's interval for a mean (``ppi_py.ppi_mean_ci`` with
``lam=1``): normal quantiles, answers independent, standard deviations with ddof 0. Given
``clusters`` (each answer's image, labelled and unlabelled alike), it resamples whole clusters
instead, labelled and unlabelled answers of one image together
(the cluster bootstrap of :mod:`lib.metrics.stats`, the project's rule for intervals), so five answers
about one image count as one unit, not five; this is our option, not the paper's.

:func:`corrected` is the row stage 07 writes where every answer is labelled (a release's human
evaluation): a random share of the labels kept (:func:`held_out`), the rest hidden, the judge's raw
mean, the corrected one and people's mean on the kept labels, each with its clustered interval,
beside people's mean on every answer, which both estimates aim at.
``benchmarks/ppi.py`` measures by simulation how often each interval covers the true accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lib.metrics.stats import (
    CONFIDENCE,
    MIN_CLUSTERS,
    N_RESAMPLES,
    _cluster_weights,  # the cluster bootstrap's draws, as mean_ci's clustered path takes them
    codes_of,
    mean_ci,
    percentile_bounds,
)

TABLE = "corrected"  # the agreement folder's table of corrected accuracies (corrected.csv)
CRITERION = "correctness"  # the verdict an accuracy counts
ALL = "all"  # the model column of a row over every answer
LABELLED_SHARE = 1 / 3  # the labels a held-out check keeps (YesBut's 150: 50), the rest hidden
_ESTIMATES = [
    f"{e}{end}" for e in ("judge_raw", "corrected", "human_only") for end in ("", "_low", "_high")
]
COLUMNS = (
    "scorer",
    "model",
    "criterion",
    "n",
    "n_labelled",
    "n_clusters",
    *_ESTIMATES,
    "human_all",
)
COLUMNS += ("corrected_covers", "human_only_covers", "few_clusters")  # corrected_table's


def ppi_mean_ci(
    human: Sequence[float],
    judge: Sequence[float],
    judge_unlabelled: Sequence[float],
    confidence: float = CONFIDENCE,
    lam: float = 1.0,
    clusters: Sequence | None = None,
    clusters_unlabelled: Sequence | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(estimate, low, high): ``lam`` x the judge's mean on the unlabelled answers plus the mean of
    ``human - lam x judge`` on the labelled ones (``human``, ``judge``: the labelled answers' verdicts
    and scores). ``lam`` 1 is the paper's PPI, 0 people's mean alone. Without ``clusters`` the
    paper's normal interval; with them (one key per labelled answer, ``clusters_unlabelled`` one per
    unlabelled answer) the percentile interval over cluster resamples, a resample drawing no
    labelled or no unlabelled answer left out."""
    y, f = np.asarray(human, dtype=float), np.asarray(judge, dtype=float)
    u = lam * np.asarray(judge_unlabelled, dtype=float)
    if len(y) != len(f):
        raise ValueError(f"ppi_mean_ci: {len(y)} verdicts for {len(f)} judge scores")
    if len(y) == 0 or len(u) == 0:
        return math.nan, math.nan, math.nan
    rectifier = y - lam * f
    estimate = float(u.mean() + rectifier.mean())
    if len(y) < 2:
        return estimate, math.nan, math.nan
    if clusters is None:
        from scipy.stats import norm

        se = math.sqrt(u.var() / len(u) + rectifier.var() / len(y))
        z = norm.ppf(1 - (1 - confidence) / 2)
        return estimate, estimate - z * se, estimate + z * se
    if clusters_unlabelled is None or len(clusters_unlabelled) != len(u):
        raise ValueError("ppi_mean_ci: clusters_unlabelled needs one key per unlabelled answer")
    codes = codes_of([*clusters, *clusters_unlabelled], len(y) + len(u))
    labelled, unlabelled = codes[: len(y)], codes[len(y) :]
    g = int(codes.max()) + 1
    sums = [np.bincount(labelled, rectifier, g), np.bincount(unlabelled, u, g)]
    sizes = [np.bincount(labelled, minlength=g), np.bincount(unlabelled, minlength=g)]
    with np.errstate(invalid="ignore", divide="ignore"):  # a resample drawing no labelled answer
        draws = np.concatenate(
            [
                (w @ sums[0]) / (w @ sizes[0]) + (w @ sums[1]) / (w @ sizes[1])
                for w in _cluster_weights(codes, n_resamples, seed)
            ]
        )
    draws = draws[np.isfinite(draws)]
    if len(draws) < 2:
        return estimate, math.nan, math.nan
    return (estimate, *percentile_bounds(draws, confidence))


def held_out(n: int, share: float = LABELLED_SHARE, seed: int = 0) -> np.ndarray:
    """Which of ``n`` answers keep their label (True), ``round(share x n)`` of them (at least two
    where there are two) drawn at random without replacement."""
    keep = np.zeros(n, dtype=bool)
    k = min(n, max(2, round(share * n)))
    keep[np.random.default_rng(seed).choice(n, size=k, replace=False)] = True
    return keep


def corrected(
    judge: Sequence[float],
    human: Sequence[float],
    clusters: Sequence,
    labelled: np.ndarray,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> dict:
    """One judge's accuracy over answers all people judged (``human``: 0/1 verdicts; ``judge``:
    its scores, as stage 06 counts them), people's verdicts kept only where ``labelled``: the
    judge's raw mean (``judge_raw``), the corrected one (``corrected``, clustered interval) and
    people's mean on the kept labels (``human_only``), each with ``_low``/``_high``, beside
    people's mean on every answer (``human_all``) and whether each interval covers it."""
    f, y = np.asarray(judge, dtype=float), np.asarray(human, dtype=float)
    keys = np.asarray(clusters, dtype=object)
    kept = np.asarray(labelled, dtype=bool)
    found = {
        "judge_raw": mean_ci(f, n_resamples, confidence, seed, clusters=list(keys)),
        "corrected": ppi_mean_ci(
            y[kept],
            f[kept],
            f[~kept],
            confidence,
            clusters=list(keys[kept]),
            clusters_unlabelled=list(keys[~kept]),
            n_resamples=n_resamples,
            seed=seed,
        ),
        "human_only": mean_ci(y[kept], n_resamples, confidence, seed, clusters=list(keys[kept])),
    }
    truth = float(y.mean()) if len(y) else math.nan
    row = {"n": len(f), "n_labelled": int(kept.sum()), "n_clusters": len(set(keys.tolist()))}
    for name, (value, low, high) in found.items():
        row.update({name: value, f"{name}_low": low, f"{name}_high": high})
    return row | {
        "human_all": truth,
        "corrected_covers": bool(found["corrected"][1] <= truth <= found["corrected"][2]),
        "human_only_covers": bool(found["human_only"][1] <= truth <= found["human_only"][2]),
    }


def corrected_table(
    judges: dict[str, np.ndarray],
    human: np.ndarray,
    clusters: np.ndarray,
    models: Sequence[str],
    share: float = LABELLED_SHARE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per judge (``judges``: name -> score per answer, NaN where unreadable: 0, as stage 06 counts
    it) and model (:data:`ALL`, then each of ``models`` where they name several), its
    :func:`corrected` row on the answers people gave a ``human`` verdict, one held-out draw of
    labels for all rows; ``few_clusters`` where the kept labels are about fewer than
    :data:`lib.metrics.stats.MIN_CLUSTERS` images."""
    judged = ~np.isnan(human)
    labelled = held_out(int(judged.sum()), share, seed)
    models = np.asarray(models, dtype=object)[judged]
    groups = {ALL: np.ones(len(labelled), dtype=bool)}
    if len(set(models.tolist()) - {""}) > 1:
        groups |= {m: models == m for m in dict.fromkeys(models.tolist())}
    rows = []
    for name, scores in judges.items():
        f = np.nan_to_num(np.asarray(scores, dtype=float), nan=0.0)[judged]
        for model, at in groups.items():
            found = corrected(
                f[at], human[judged][at], clusters[judged][at], labelled[at], n_resamples, seed
            )
            few = len(set(clusters[judged][at & labelled].tolist())) < MIN_CLUSTERS
            rows.append(
                {"scorer": name, "model": model, "criterion": CRITERION, **found}
                | {"few_clusters": few}
            )
    return pd.DataFrame(rows, columns=list(COLUMNS))
