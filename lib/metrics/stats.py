"""Bootstrap confidence intervals: scipy.stats.bootstrap (percentile method, fixed seed) over item
indices, with *vectorised* statistics - each takes arrays whose last axis holds the items and
returns one value per leading index - so a ratio statistic such as F1 or a macro average over
question types costs one numpy pass for all resamples instead of one library call per resample.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

N_RESAMPLES = 1000
CONFIDENCE = 0.95


def bootstrap_ci(statistic: Callable, samples: Sequence[Sequence], n_resamples: int = N_RESAMPLES,
                 confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float, float]:
    """(value, low, high) of a vectorised ``statistic(*arrays)``, items resampled together (paired).

    Constant results give a zero-width interval; fewer than two items give NaN bounds.
    """
    from scipy.stats import bootstrap

    arrays = [np.asarray(s) for s in samples]
    n = len(arrays[0]) if arrays else 0
    if any(len(a) != n for a in arrays):
        raise ValueError(f"bootstrap_ci: samples of different lengths {[len(a) for a in arrays]}")
    if n == 0:
        return math.nan, math.nan, math.nan
    value = float(statistic(*arrays))
    if n < 2:
        return value, math.nan, math.nan

    def stat(idx, axis=-1):
        return statistic(*(a[idx] for a in arrays))

    res = bootstrap((np.arange(n),), stat, n_resamples=n_resamples, confidence_level=confidence, method="percentile",
                    vectorized=True, batch=max(1, 2_000_000 // n), random_state=np.random.default_rng(seed))
    low, high = res.confidence_interval
    if math.isnan(low):  # scipy returns NaN for a degenerate (constant) bootstrap distribution
        low = high = value
    return value, float(low), float(high)


def mean_ci(values: Sequence[float], n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE,
            seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high) of per-item scores."""
    return bootstrap_ci(lambda a: np.mean(a, axis=-1), [np.asarray(values, dtype=float)], n_resamples, confidence, seed)
