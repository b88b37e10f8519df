"""The statistics of a paired comparison of two runs (:mod:`lib.compare.explain`): per metric, the
paired difference B - A with an interval over the items' clusters (an image's questions move
together, in both runs at once), the test that interval inverts, a McNemar test for 0/1 scores, the
smallest difference the comparison could detect, and the words a reader is told.

The interval is small-sample honest (:mod:`lib.metrics.smallsample`): the CR2 cluster-robust
standard error of the mean per-item difference with Student t quantiles on G - 1 degrees of
freedom, G the clusters, where a percentile bootstrap over few clusters is too narrow (its coverage
is measured against this one's by ``benchmarks/coverage.py``). The smallest detectable difference
is ``(t_{G-1, 0.975} + t_{G-1, 0.8}) x SE``, a two-sided test at 5% with 80% power on the same
quantiles, so it grows with fewer clusters as the interval does. The row's ``p`` is that interval's
own t test (below 0.05 exactly when the interval excludes 0), the one the many-comparison
adjustments (:mod:`lib.metrics.multiple`) use. ``mcnemar_p`` is the exact McNemar test where every
cluster holds one question, and Durkalski's clustered McNemar where clusters hold several
(:func:`lib.metrics.smallsample.clustered_mcnemar`), never questions about one image counted as
independent pairs.

A row is told in one of three wordings (:func:`verdict`): B is better or worse when the interval
excludes 0; no difference detected, with the smallest one that would have been, when it includes
0; too few clusters to tell below :data:`lib.metrics.stats.MIN_CLUSTERS`, the floor under which
no interval is shown as if it held (its t quantiles over fewer than four degrees of freedom are so
wide, and its cluster means so few, that the row says nothing).
"""

from __future__ import annotations

import math

import numpy as np

from lib.metrics.multiple import LEVEL, benjamini_hochberg, holm, survives
from lib.metrics.smallsample import POWER, clustered_mcnemar, clustered_mean
from lib.metrics.stats import MIN_CLUSTERS, N_RESAMPLES, bootstrap_ci, n_clusters

VERDICTS = ("better", "worse", "none detected", "too few clusters")  # verdict's kinds, in order


def paired_difference(
    a, b, n_resamples: int = N_RESAMPLES, seed: int = 0, clusters=None
) -> tuple[float, float, float]:
    """``mean(b) - mean(a)`` of paired per-item scores and its percentile bootstrap interval, both
    runs' scores of an item resampled together, and whole ``clusters`` (one key per item) when given
    (:func:`lib.metrics.stats.bootstrap_ci`); training's validation margins use it."""
    return bootstrap_ci(
        lambda x, y: np.mean(y - x, axis=-1),
        [np.asarray(a, float), np.asarray(b, float)],
        n_resamples=n_resamples,
        seed=seed,
        clusters=clusters,
    )


def mcnemar_exact(a, b) -> float:
    """The exact McNemar test of paired 0/1 outcomes: a two-sided binomial test of the discordant
    pairs (right in A only against right in B only) at one half; 1.0 without discordant pairs."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, bool), np.asarray(b, bool)
    only_a, only_b = int((a & ~b).sum()), int((b & ~a).sum())
    return 1.0 if only_a + only_b == 0 else float(binomtest(only_b, only_a + only_b, 0.5).pvalue)


def mcnemar(a, b, clusters=None) -> float:
    """McNemar's test that matches the clusters: exact where every cluster holds one question,
    Durkalski's clustered form where some hold several."""
    if clusters is None or n_clusters(clusters, len(a)) == len(a):
        return mcnemar_exact(a, b)
    return clustered_mcnemar(a, b, clusters)


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def difference_stats(a, b, clusters) -> dict:
    """B - A's small-sample statistics over ``clusters``: the difference, its 95% interval, the
    interval's t test, its degrees of freedom and the smallest difference it detects."""
    mean = clustered_mean(np.asarray(b, float) - np.asarray(a, float), clusters)
    low, high = mean.interval()
    return {
        "difference": mean.value,
        "ci_low": low,
        "ci_high": high,
        "df": mean.df,
        "p": _finite(mean.p_value()),
        "detectable": _finite(mean.detectable()),
    }


def clusters_are(images) -> str:
    """What a group's clusters are, for the words (``images``: each cluster's set of images):
    ``chains`` where a cluster spans several images (Scrapbook's scene and the images derived from
    it), ``images`` where each holds one, ``questions`` where no item has an image."""
    images = list(images)
    if any(len(i) > 1 for i in images):
        return "chains"
    return "images" if any(images) else "questions"


def verdict(row: dict) -> tuple[str, str]:
    """One of :data:`VERDICTS` and its words for a metric row: better or worse when the interval
    excludes 0, none detected (with what would have been) when it includes it, too few clusters
    below the floor."""
    g, noun = row["n_clusters"], row.get("clusters_are") or "clusters"
    if g < MIN_CLUSTERS or row["ci_low"] is None or math.isnan(row["ci_low"]):
        return VERDICTS[
            3
        ], f"too few clusters to tell ({g} {noun}; an interval needs {MIN_CLUSTERS})"
    ci = f"{row['difference']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}] over {g} {noun}"
    if row["ci_low"] > 0 or row["ci_high"] < 0:
        kind = VERDICTS[0] if row["difference"] > 0 else VERDICTS[1]
        return kind, f"B is {kind}: {ci}"
    return VERDICTS[2], (
        f"no difference detected, and one of {row['detectable']:.3f} or more would have been seen "
        f"({POWER:.0%} power): {ci}"
    )


def adjust(rows: list[dict], level: float = LEVEL) -> list[dict]:
    """``rows`` with Holm's (family-wise) and Benjamini-Hochberg's (false discovery) adjusted p
    across every row that has a test (not below the cluster floor), and whether each survives."""
    p = [r["p"] if r["verdict"] != VERDICTS[3] else None for r in rows]
    for r, h, q in zip(rows, holm(p), benjamini_hochberg(p)):
        r.update(p_holm=h, p_bh=q, holm=survives(h, level), bh=survives(q, level))
    return rows


def metric_rows(
    group: tuple, scored: list[tuple], causes: tuple = (), clusters_are: str = "images"
) -> list[dict]:
    """One row per metric both runs scored the group's items by (``scored``: per item, A's scores,
    B's scores, its cause and its cluster): A, B, B - A with its small-sample interval over
    clusters (module docstring), the number of clusters and what they are (``clusters_are``), the
    interval's test, the smallest detectable difference, McNemar's p for 0/1 scores, the verdict
    in words, and B - A carried by the items of each of ``causes``."""
    rows = []
    names = (
        sorted(set.intersection(*(set(oa) & set(ob) for oa, ob, *_ in scored))) if scored else []
    )
    clusters = [c for *_, c in scored]
    for name in names:
        a = np.array([oa[name] for oa, *_ in scored])
        b = np.array([ob[name] for _, ob, *_ in scored])
        binary = bool(np.isin(np.concatenate([a, b]), (0.0, 1.0)).all())
        by = {
            c: float(
                sum(y - x for x, y, (_, _, cause, _) in zip(a, b, scored) if cause == c) / len(a)
            )
            for c in causes
        }
        row = {
            "group": list(group),
            "metric": name,
            "n": len(a),
            "n_clusters": n_clusters(clusters, len(a)),
            "clusters_are": clusters_are,
            "A": float(a.mean()),
            "B": float(b.mean()),
            **difference_stats(a, b, clusters),
            "mcnemar_p": mcnemar(a, b, clusters) if binary else None,
            "by_cause": by,
        }
        row["verdict"], row["words"] = verdict(row)
        rows.append(row)
    return rows
