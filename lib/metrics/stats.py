"""Bootstrap confidence intervals: scipy.stats.bootstrap (percentile method, fixed seed) over item
indices, with *vectorised* statistics - each takes arrays whose last axis holds the items and
returns one value per leading index - so a ratio statistic such as F1 or a macro average over
question types costs one numpy pass for all resamples instead of one library call per resample.

A mean's interval (:func:`mean_ci`) resamples *counts*: drawing n items with replacement from n
scores is drawing how often each distinct score is picked, Multinomial(n, its share), so the
bootstrap distribution is the same at O(distinct scores) per resample instead of O(n) -
hand-written because scipy resamples indices, O(n) per resample, which dominates a rescore of a
paper-scale Scrapbook dataset. Scores with many distinct values (where a drawn count costs more
than an index) still resample indices through scipy.

:func:`score_change` says which way one item's scores moved between two runs (a comparison's
improved and worsened items).

Clusters: questions about one image are not independent (MemeQA asks up to 11 question types of one
meme, Scrapbook dozens of one image), so an interval that resamples questions is too narrow. Given
``clusters`` (one key per item: its image, or a coarser unit), every interval here resamples whole
clusters instead - the cluster (or "block") bootstrap: a resample draws G clusters with replacement
and keeps every item of each. When every item is its own cluster, the question-level path runs
unchanged, so the interval is today's to the bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

N_RESAMPLES = 1000
CONFIDENCE = 0.95
# An interval from fewer clusters is not to be trusted: the bootstrap redraws so few images that its
# percentiles come from a handful of distinct resamples (one image: none; two to four: too narrow),
# so a table shows such a value flagged (:func:`interval_text`), never with an interval as if it held.
MIN_CLUSTERS = 5
COUNTS_PER_INDEX = 8  # a multinomial count costs ~8 index draws (measured): fewer distinct scores than n / 8 draw counts


def codes_of(clusters: Sequence | None, n: int) -> np.ndarray:
    """``clusters`` (one hashable key per item; None: each item its own) as codes 0..G-1 in order of
    first appearance."""
    if clusters is None:
        return np.arange(n)
    if len(clusters) != n:
        raise ValueError(f"clusters: {len(clusters)} keys for {n} items")
    codes: dict = {}
    return np.fromiter((codes.setdefault(k, len(codes)) for k in clusters), dtype=np.int64, count=n)


def cluster_codes(clusters: Sequence | None, n: int) -> np.ndarray | None:
    """:func:`codes_of`, or None when every item is its own cluster (the question-level bootstrap applies)."""
    if clusters is None:
        return None
    codes = codes_of(clusters, n)
    return None if n == 0 or codes.max() == n - 1 else codes


def n_clusters(clusters: Sequence | None, n: int) -> int:
    """How many independent units an interval over ``n`` items resamples: its clusters, or ``n``."""
    return n if clusters is None else len(set(clusters))


def percentile_bounds(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval of bootstrap ``draws`` at ``confidence``."""
    alpha = (1 - confidence) / 2
    low, high = np.percentile(draws, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def _cluster_weights(codes: np.ndarray, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """How often each cluster is drawn (G draws with replacement per resample), in blocks of
    resamples x G holding at most ~2M counts (a paper-scale set has many thousand images)."""
    g = int(codes.max()) + 1
    rng, batch = np.random.default_rng(seed), max(1, 2_000_000 // g)
    for start in range(0, n_resamples, batch):
        yield rng.multinomial(g, np.full(g, 1 / g), size=min(batch, n_resamples - start))


def cluster_resamples(
    codes: np.ndarray, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> Iterator[np.ndarray]:
    """The item indices of each cluster resample (``codes``: each item's cluster, 0..G-1): every
    item of each drawn cluster, as often as it was drawn, so a resample's size varies. Codes all
    distinct give the ordinary bootstrap of items."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    for block in _cluster_weights(codes, n_resamples, seed):
        for w in block:
            yield np.repeat(order, w[sorted_codes])


def item_or_cluster_resamples(
    clusters: Sequence | None, n: int, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> Iterator[np.ndarray]:
    """The indices of each resample of ``n`` items: whole ``clusters`` (:func:`cluster_resamples`),
    or, with none or every item its own, ``n`` items drawn with replacement (one draw per resample,
    as a hand-written item bootstrap always drew them)."""
    codes = cluster_codes(clusters, n)
    if codes is not None:
        yield from cluster_resamples(codes, n_resamples, seed)
        return
    rng = np.random.default_rng(seed)
    for _ in range(n_resamples):
        yield rng.integers(0, n, n)


def _cluster_bootstrap(
    statistic: Callable,
    arrays: list[np.ndarray],
    codes: np.ndarray,
    n_resamples: int,
    confidence: float,
    seed: int,
) -> tuple[float, float]:
    """Percentile bounds of ``statistic`` over cluster resamples (one call per resample)."""
    draws = np.array(
        [
            float(statistic(*(a[idx] for a in arrays)))
            for idx in cluster_resamples(codes, n_resamples, seed)
        ]
    )
    return percentile_bounds(draws[~np.isnan(draws)], confidence)


def bootstrap_ci(
    statistic: Callable,
    samples: Sequence[Sequence],
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    clusters: Sequence | None = None,
) -> tuple[float, float, float]:
    """(value, low, high) of a vectorised ``statistic(*arrays)``, items resampled together (paired),
    or whole ``clusters`` (one key per item) when given (see the module docstring).

    Constant results give a zero-width interval; fewer than two items (or clusters) give NaN bounds.
    """
    from scipy.stats import bootstrap

    arrays = [np.asarray(s) for s in samples]
    n = len(arrays[0]) if arrays else 0
    if any(len(a) != n for a in arrays):
        raise ValueError(f"bootstrap_ci: samples of different lengths {[len(a) for a in arrays]}")
    if n == 0:
        return math.nan, math.nan, math.nan
    value = float(statistic(*arrays))
    codes = cluster_codes(clusters, n)
    if n < 2 or (codes is not None and codes.max() == 0):
        return value, math.nan, math.nan
    if codes is not None:
        return (value, *_cluster_bootstrap(statistic, arrays, codes, n_resamples, confidence, seed))

    def stat(idx, axis=-1):
        return statistic(*(a[idx] for a in arrays))

    res = bootstrap(
        (np.arange(n),),
        stat,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        batch=max(1, 2_000_000 // n),
        random_state=np.random.default_rng(seed),
    )
    low, high = res.confidence_interval
    if math.isnan(low):  # scipy returns NaN for a degenerate (constant) bootstrap distribution
        low = high = value
    return value, float(low), float(high)


def mean_ci(
    values: Sequence[float],
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    clusters: Sequence | None = None,
) -> tuple[float, float, float]:
    """(mean, low, high) of per-item scores: the percentile bootstrap (as :func:`bootstrap_ci`),
    each resample drawn as the counts of the distinct scores (see the module docstring); with
    ``clusters``, whole clusters are drawn, a resample's mean being its clusters' summed scores over
    their summed sizes (one matrix product for all resamples)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan
    value = float(x.mean())
    codes = cluster_codes(clusters, n)
    if n < 2 or (codes is not None and codes.max() == 0):
        return value, math.nan, math.nan
    if codes is not None:
        if np.all(x == x[0]):
            return value, value, value
        sums, sizes = np.bincount(codes, weights=x), np.bincount(codes).astype(float)
        means = np.concatenate(
            [(w @ sums) / (w @ sizes) for w in _cluster_weights(codes, n_resamples, seed)]
        )
        return (value, *percentile_bounds(means, confidence))
    scores, counts = np.unique(x, return_counts=True)
    if len(scores) == 1:
        return value, value, value
    if len(scores) * COUNTS_PER_INDEX > n:
        return bootstrap_ci(lambda a: np.mean(a, axis=-1), [x], n_resamples, confidence, seed)
    rng = np.random.default_rng(seed)
    batch = max(
        1, 2_000_000 // len(scores)
    )  # resamples per draw: at most ~2M counts in memory at once
    means = np.concatenate(
        [
            rng.multinomial(n, counts / n, size=min(batch, n_resamples - start)) @ scores / n
            for start in range(0, n_resamples, batch)
        ]
    )
    return (value, *percentile_bounds(means, confidence))


def interval_text(value, low, high, clusters, fmt: str = ".3f") -> str:
    """A value as a table shows it: ``v [low, high]``, or flagged where fewer than
    :data:`MIN_CLUSTERS` clusters make its interval untrustworthy, ``n/a`` for no value."""
    if value is None or math.isnan(value):
        return "n/a"
    if clusters is not None and clusters < MIN_CLUSTERS:
        return f"{value:{fmt}} (too few images for an interval: {int(clusters)})"
    if low is None or math.isnan(low):
        return f"{value:{fmt}} (no interval)"
    return f"{value:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


CHANGES = (
    "improved",
    "worsened",
    "mixed",
    "same scores",
)  # which way an item's scores moved (score_change)


def score_change(a: dict, b: dict) -> str:
    """Which way one item's per-answer scores moved from run A (``a``: metric -> value) to run B,
    over the metrics both have: ``improved`` (one rose, none fell), ``worsened`` (one fell, none
    rose), ``mixed`` (some rose, some fell: BLEU up, ROUGE-L down) or ``same scores``."""
    shared = [k for k in a if k in b and a[k] is not None and b[k] is not None]
    up, down = any(b[k] > a[k] for k in shared), any(b[k] < a[k] for k in shared)
    return (
        CHANGES[3]
        if not (up or down)
        else CHANGES[2]
        if up and down
        else CHANGES[0]
        if up
        else CHANGES[1]
    )
