"""Small-sample inference for a mean over clusters: the paired difference of two runs' per-item
scores where the items fall into few clusters (Scrapbook's image chains, a handful of memes).

A percentile bootstrap over G clusters is too narrow when G is small: its resamples see only the G
clusters drawn, so its spread is the plug-in (divide-by-G) spread, and its percentiles are normal
ones. Here the mean's standard error is the cluster-robust one with the CR2 bias-reduced
linearisation of Bell and McCaffrey (2002), and intervals, tests and detectable differences use
Student t quantiles with G - 1 degrees of freedom, the combination Cameron and Miller (2015, "A
Practitioner's Guide to Cluster-Robust Inference", J. Human Resources 50(2), section VI) and Imbens
and Kolesar (2016, Rev. Econ. Stat. 98(4)) recommend for few clusters.

For the mean (a regression on a constant) CR2 has a closed form: with N items, cluster g holding
n_g of them and E_g the sum of its residuals ``d_i - mean``, ``V = sum_g E_g^2 / (1 - n_g / N) / N^2``.
With clusters of one size this is the variance of the cluster means over G (G - 1 in the
denominator), so the interval is the t interval of the G cluster means; with every item its own
cluster it is the paired t interval of the items. ``benchmarks/coverage.py`` measures the coverage
of this interval against the percentile bootstrap on data shaped like the demo's.

:func:`clustered_mcnemar` is Durkalski et al.'s (2003, Stat. Med. 22(15)) McNemar test for
clustered matched pairs: the discordant pairs are counted per cluster, so a cluster's questions
count once, not as independent pairs; with one question per cluster it is McNemar's (uncorrected).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lib.metrics.stats import CONFIDENCE, codes_of

POWER = 0.8  # the power at which the smallest detectable difference is stated


@dataclass(frozen=True)
class ClusteredMean:
    """A mean over clusters with its CR2 standard error and the t quantiles' degrees of freedom."""

    value: float
    se: float
    df: int

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """``value -/+ t_{df} x se``; NaN bounds below two clusters."""
        if self.df < 1:
            return math.nan, math.nan
        half = t_quantile(1 - (1 - confidence) / 2, self.df) * self.se
        return self.value - half, self.value + half

    def p_value(self) -> float:
        """The two-sided t test of ``value == 0`` that the interval inverts: below ``1 -
        confidence`` exactly when the interval excludes 0."""
        from scipy.stats import t

        if self.df < 1:
            return math.nan
        if self.se == 0:
            return 1.0 if self.value == 0 else 0.0
        return float(2 * t.sf(abs(self.value) / self.se, self.df))

    def detectable(self, confidence: float = CONFIDENCE, power: float = POWER) -> float:
        """The smallest difference a two-sided test at ``1 - confidence`` detects with ``power``:
        ``(t_{df, 1 - alpha/2} + t_{df, power}) x se``, the same t quantiles as the interval."""
        if self.df < 1:
            return math.nan
        return float(
            (t_quantile(1 - (1 - confidence) / 2, self.df) + t_quantile(power, self.df)) * self.se
        )


def t_quantile(q: float, df: int) -> float:
    """Student t's ``q`` quantile with ``df`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(q, df))


def clustered_mean(values, clusters: Sequence | None = None) -> ClusteredMean:
    """The mean of per-item ``values`` with its CR2 cluster-robust standard error (module
    docstring) over ``clusters`` (one key per item; None: each item its own), df = G - 1."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return ClusteredMean(math.nan, math.nan, 0)
    codes = codes_of(clusters, n)
    g = int(codes.max()) + 1
    value = float(x.mean())
    if g < 2:
        return ClusteredMean(value, math.nan, 0)
    sums = np.bincount(codes, weights=x - value, minlength=g)
    sizes = np.bincount(codes, minlength=g).astype(float)
    variance = float(np.sum(sums**2 / (1 - sizes / n))) / n**2
    return ClusteredMean(value, math.sqrt(max(variance, 0.0)), g - 1)


def clustered_mcnemar(a, b, clusters: Sequence | None = None) -> float:
    """Durkalski et al.'s (2003) clustered McNemar p for paired 0/1 outcomes ``a`` and ``b``: with
    ``D_g`` the pairs right in B only minus those right in A only in cluster g, ``(sum D_g)^2 /
    sum D_g^2`` against chi-squared with 1 df; 1.0 without discordant pairs."""
    from scipy.stats import chi2

    a, b = np.asarray(a, bool), np.asarray(b, bool)
    codes = codes_of(clusters, len(a))
    d = np.bincount(codes, weights=(b & ~a).astype(float) - (a & ~b).astype(float))
    denominator = float(np.sum(d**2))
    if denominator == 0:
        return 1.0
    return float(chi2.sf(float(d.sum()) ** 2 / denominator, 1))
