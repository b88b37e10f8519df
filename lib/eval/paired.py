"""The statistics of a paired comparison of two runs (:mod:`lib.eval.compare`): per metric, the
paired difference with a bootstrap interval that resamples the items' clusters (an image's questions
move together, in both runs at once), an exact McNemar test for 0/1 scores, and the smallest
difference the comparison could detect.

The smallest detectable difference is the normal approximation for a two-sided test at 5% with 80%
power, ``(z_0.975 + z_0.8) x SE``, the standard error of the mean paired difference taken from the
same clustered bootstrap (half the interval's width over ``z_0.975``); so it grows with fewer
clusters as the interval does. A difference smaller than it is not evidence either way.
"""

from __future__ import annotations

import numpy as np

from lib.metrics.stats import CONFIDENCE, N_RESAMPLES, bootstrap_ci, n_clusters

POWER = 0.8  # the power at which the smallest detectable difference is stated


def paired_difference(
    a, b, n_resamples: int = N_RESAMPLES, seed: int = 0, clusters=None
) -> tuple[float, float, float]:
    """``mean(b) - mean(a)`` of paired per-item scores and its percentile bootstrap interval, both
    runs' scores of an item resampled together, and whole ``clusters`` (one key per item) when given
    (:func:`lib.metrics.stats.bootstrap_ci`)."""
    return bootstrap_ci(
        lambda x, y: np.mean(y - x, axis=-1),
        [np.asarray(a, float), np.asarray(b, float)],
        n_resamples=n_resamples,
        seed=seed,
        clusters=clusters,
    )


def detectable_difference(low: float, high: float, confidence: float = CONFIDENCE) -> float:
    """The smallest difference a comparison with the interval ``[low, high]`` detects with
    :data:`POWER` at ``1 - confidence`` (two-sided), from the standard error the interval implies."""
    from scipy.stats import norm

    z = norm.ppf(1 - (1 - confidence) / 2)
    return float((z + norm.ppf(POWER)) * (high - low) / (2 * z))


def mcnemar_exact(a, b) -> float:
    """The exact McNemar test of paired 0/1 outcomes: a two-sided binomial test of the discordant
    pairs (right in A only against right in B only) at one half; 1.0 without discordant pairs."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, bool), np.asarray(b, bool)
    only_a, only_b = int((a & ~b).sum()), int((b & ~a).sum())
    return 1.0 if only_a + only_b == 0 else float(binomtest(only_b, only_a + only_b, 0.5).pvalue)


def metric_rows(
    group: tuple, scored: list[tuple], n_resamples: int, seed: int, causes: tuple = ()
) -> list[dict]:
    """One row per metric both runs scored the group's items by (``scored``: per item, A's scores,
    B's scores, its cause and its cluster): A, B, B - A with its paired interval over clusters, the
    number of clusters, the smallest detectable difference, McNemar's p for 0/1 scores, and B - A
    carried by the items of each of ``causes``."""
    rows = []
    names = (
        sorted(set.intersection(*(set(oa) & set(ob) for oa, ob, *_ in scored))) if scored else []
    )
    clusters = [c for *_, c in scored]
    for name in names:
        a = np.array([oa[name] for oa, *_ in scored])
        b = np.array([ob[name] for _, ob, *_ in scored])
        diff, low, high = paired_difference(a, b, n_resamples, seed, clusters)
        binary = bool(np.isin(np.concatenate([a, b]), (0.0, 1.0)).all())
        by = {
            c: float(
                sum(y - x for x, y, (_, _, cause, _) in zip(a, b, scored) if cause == c) / len(a)
            )
            for c in causes
        }
        rows.append(
            {
                "group": list(group),
                "metric": name,
                "n": len(a),
                "n_clusters": n_clusters(clusters, len(a)),
                "A": float(a.mean()),
                "B": float(b.mean()),
                "difference": diff,
                "ci_low": low,
                "ci_high": high,
                "detectable": detectable_difference(low, high) if np.isfinite(high - low) else None,
                "mcnemar_p": mcnemar_exact(a, b) if binary else None,
                "by_cause": by,
            }
        )
    return rows
