"""How often a comparison's 95% interval covers the true difference (``make bench``): writes
outputs/bench/coverage.json.

A simulation on data shaped like the demo's Scrapbook comparison: G clusters (image chains) of 40
to 84 questions, 0/1 scores, each chain with its own accuracy for run A (uniform 0.3 to 0.7) and
its own shift for run B (the true difference plus uniform -0.15 to 0.15), the two runs' answers to
one question correlated (half share one latent draw). Sizes and shifts are independent, so the
true paired difference is :data:`DELTA`. Per number of clusters and method, the share of replicates
whose 95% interval holds it, the mean width, and the mean smallest detectable difference:
``percentile`` is the cluster bootstrap the comparison used before (:func:`lib.metrics.stats.mean_ci`,
its detectable difference the normal formula on the interval's implied error), ``cr0_normal`` the
plain cluster-robust error with normal quantiles, ``cr2_t`` the comparison's interval now (CR2
error, t with G - 1 df: :mod:`lib.metrics.smallsample`). ``tests/metrics/test_smallsample.py``
reruns it small.
"""

from __future__ import annotations

import numpy as np

from benchmarks.records import host_state, record
from lib.metrics.smallsample import clustered_mean
from lib.metrics.stats import N_RESAMPLES, mean_ci

CLUSTERS = (5, 8, 12, 30)  # the demo's Scrapbook sets have 8 and 12 chains
REPLICATES = 4000  # the coverage's standard error is about 0.0035 at 95%
DELTA = 0.05  # the true difference B - A
SIZES = (40, 84)  # questions per chain, inclusive (the demo's mean is about 62)
NOMINAL = 0.95
Z, Z_POWER = 1.959964, 0.841621  # normal quantiles at 0.975 and 0.8 (the old detectable formula)
TARGETS = {
    "cr2_t_worst_gap": "<= 0.02",  # |coverage - 0.95| at 8, 12 and 30 clusters
    "percentile_at_8": "< 0.94",  # the old method's undercoverage, shown
}


def sample(g: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One replicate: the per-question differences B - A and each question's chain."""
    sizes = rng.integers(SIZES[0], SIZES[1] + 1, g)
    p_a = rng.uniform(0.3, 0.7, g)
    p_b = p_a + DELTA + rng.uniform(-0.15, 0.15, g)
    chain = np.repeat(np.arange(g), sizes)
    u = rng.random(len(chain))
    shared = rng.random(len(chain)) < 0.5
    v = np.where(shared, u, rng.random(len(chain)))
    return (v < p_b[chain]).astype(float) - (u < p_a[chain]).astype(float), chain


def _methods(d: np.ndarray, chain: np.ndarray, seed: int) -> dict[str, tuple[float, float, float]]:
    """Each method's (low, high, detectable difference) for one replicate."""
    _, low, high = mean_ci(d, n_resamples=N_RESAMPLES, seed=seed, clusters=chain)
    m = clustered_mean(d, chain)
    se0 = float(np.sqrt(np.sum(np.bincount(chain, weights=d - m.value) ** 2)) / len(d))  # CR0
    t_low, t_high = m.interval()
    return {
        "percentile": (low, high, (Z + Z_POWER) * (high - low) / (2 * Z)),
        "cr0_normal": (m.value - Z * se0, m.value + Z * se0, (Z + Z_POWER) * se0),
        "cr2_t": (t_low, t_high, m.detectable()),
    }


def coverage(g: int, replicates: int = REPLICATES, seed: int = 0) -> dict[str, float]:
    """Per method, the share of ``replicates`` whose 95% interval over ``g`` chains holds
    :data:`DELTA`, and (``<method>_width``, ``<method>_detectable``) the means of those."""
    rng = np.random.default_rng(seed)
    hits, widths, detects = {}, {}, {}
    for r in range(replicates):
        for name, (low, high, det) in _methods(*sample(g, rng), seed=r).items():
            hits[name] = hits.get(name, 0) + (low <= DELTA <= high)
            widths[name] = widths.get(name, 0.0) + (high - low)
            detects[name] = detects.get(name, 0.0) + det
    out = {name: float(hits[name] / replicates) for name in hits}
    out.update({f"{name}_width": float(widths[name] / replicates) for name in widths})
    out.update({f"{name}_detectable": float(detects[name] / replicates) for name in detects})
    return out


def main() -> dict:
    before = host_state()
    table = {f"clusters_{g}": coverage(g, seed=g) for g in CLUSTERS}
    result = {
        "nominal": NOMINAL,
        "replicates": REPLICATES,
        "true_difference": DELTA,
        "questions_per_cluster": list(SIZES),
        "coverage": table,
        "cr2_t_worst_gap": max(abs(table[f"clusters_{g}"]["cr2_t"] - NOMINAL) for g in (8, 12, 30)),
        "percentile_at_8": table["clusters_8"]["percentile"],
    }
    return record("coverage", result, before, TARGETS)


if __name__ == "__main__":
    main()
