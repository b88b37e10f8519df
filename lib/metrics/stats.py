"""Bootstrap confidence intervals (scipy.stats.bootstrap, percentile method, fixed seed)."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

N_RESAMPLES = 1000
CONFIDENCE = 0.95


def mean_ci(values: Sequence[float], n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE,
            seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high) of per-item scores; NaN bounds when fewer than two items."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    return bootstrap_ci(lambda a: float(np.mean(a)), [x], n_resamples, confidence, seed, vectorized_mean=True)


def bootstrap_ci(statistic: Callable, samples: Sequence[Sequence], n_resamples: int = N_RESAMPLES,
                 confidence: float = CONFIDENCE, seed: int = 0,
                 vectorized_mean: bool = False) -> tuple[float, float, float]:
    """(value, low, high) of ``statistic(*samples)`` with items resampled together (paired).

    ``samples`` are equally long sequences (e.g. gold labels and predictions for an F1). Constant
    data gives a zero-width interval; fewer than two items gives NaN bounds.
    """
    from scipy.stats import bootstrap

    arrays = [np.asarray(s, dtype=object if not _numeric(s) else float) for s in samples]
    value = float(statistic(*arrays))
    n = len(arrays[0])
    if n < 2:
        return value, math.nan, math.nan
    if all(_numeric(a) and np.all(a == a[0]) for a in arrays):
        return value, value, value
    if vectorized_mean:
        res = bootstrap((arrays[0],), lambda a, axis=-1: np.mean(a, axis=axis), n_resamples=n_resamples,
                        confidence_level=confidence, method="percentile", vectorized=True,
                        random_state=np.random.default_rng(seed))
    else:
        idx = np.arange(n)
        res = bootstrap((idx,), lambda i: statistic(*(a[i.astype(int)] for a in arrays)), n_resamples=n_resamples,
                        confidence_level=confidence, method="percentile", vectorized=False,
                        random_state=np.random.default_rng(seed))
    low, high = res.confidence_interval
    return value, float(low), float(high)


def _numeric(a) -> bool:
    try:
        return np.asarray(a).dtype.kind in "biuf"
    except (TypeError, ValueError):
        return False
