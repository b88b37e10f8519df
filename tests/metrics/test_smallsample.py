"""Small-sample intervals, the paired tests and the many-comparison adjustments, checked against
hand-worked cases and independent references (statsmodels' paired t, McNemar and multipletests),
and by a small rerun of the coverage simulation (benchmarks/coverage.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lib.eval.paired import VERDICTS, adjust, clusters_are, difference_stats, mcnemar, verdict
from lib.metrics.multiple import adjusted_text, benjamini_hochberg, holm
from lib.metrics.smallsample import clustered_mcnemar, clustered_mean


def test_the_cr2_interval_of_equal_clusters_is_the_t_interval_of_their_means_by_hand():
    """Three clusters of two: means 0.5, 1, 0.5; their mean 2/3, their sd sqrt(1/12), SE
    sqrt(1/12)/sqrt(3) = 1/6; t(2)'s 0.975 quantile is 4.302653 (table value)."""
    m = clustered_mean([1, 0, 1, 1, 0, 1], ["a", "a", "b", "b", "c", "c"])
    assert (m.value, m.se, m.df) == pytest.approx((2 / 3, 1 / 6, 2))
    low, high = m.interval()
    assert (low, high) == pytest.approx((2 / 3 - 4.302653 / 6, 2 / 3 + 4.302653 / 6), abs=1e-6)
    # t(2)'s quantiles in closed form, (2q - 1) / sqrt(2q(1 - q)): 0.8 -> 0.6 / sqrt(0.32)
    assert m.detectable() == pytest.approx((4.302653 + 0.6 / 0.32**0.5) / 6, abs=1e-6)


def test_unequal_clusters_follow_the_closed_form_cr2_by_hand():
    """Clusters of 1, 1 and 2 items, values 1, 0, 1, 1 (mean 3/4): residual sums 1/4, -3/4, 1/2;
    CR2 divides each square by 1 - n_g/N (3/4, 3/4, 1/2): (1/12 + 3/4 + 1/2) / 16 = 1/12."""
    m = clustered_mean([1, 0, 1, 1], [0, 1, 2, 2])
    assert m.se**2 == pytest.approx(1 / 12) and m.df == 2


def test_one_item_per_cluster_is_statsmodels_paired_t():
    from statsmodels.stats.weightstats import DescrStatsW

    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 2, 80).astype(float), rng.random(80)
    row = difference_stats(a, b, list(range(80)))
    ref = DescrStatsW(b - a)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(ref.tconfint_mean(alpha=0.05))
    assert row["p"] == pytest.approx(ref.ttest_mean(0)[1]) and row["df"] == 79


def test_the_interval_and_its_test_agree_on_zero():
    rng = np.random.default_rng(3)
    for _ in range(50):
        g = rng.integers(0, 8, 60)
        a, b = rng.integers(0, 2, 60), rng.integers(0, 2, 60)
        row = difference_stats(a, b, list(g))
        excludes = row["ci_low"] > 0 or row["ci_high"] < 0
        assert excludes == (row["p"] < 0.05)


def test_durkalskis_mcnemar_by_hand_and_plain_mcnemar_with_one_question_per_cluster():
    """Clusters with B-only minus A-only pairs 2, 1 and -1: (2)^2 / (4 + 1 + 1) = 2/3 on chi2(1);
    one question per cluster it is statsmodels' uncorrected McNemar, and mcnemar() is exact."""
    from scipy.stats import chi2
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    a = [0, 0, 1, 0, 1, 1, 1, 0]
    b = [1, 1, 1, 1, 1, 0, 1, 0]
    g = ["x", "x", "x", "y", "y", "z", "z", "z"]
    assert clustered_mcnemar(a, b, g) == pytest.approx(chi2.sf(2 / 3, 1))
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 2, 90), rng.integers(0, 2, 90)
    table = [[np.sum((a == 1) & (b == 1)), np.sum((a == 1) & (b == 0))],
             [np.sum((a == 0) & (b == 1)), np.sum((a == 0) & (b == 0))]]  # fmt: skip
    plain = sm_mcnemar(table, exact=False, correction=False).pvalue
    assert clustered_mcnemar(a, b) == pytest.approx(plain)
    assert mcnemar(a, b, list(range(90))) == pytest.approx(sm_mcnemar(table, exact=True).pvalue)
    assert clustered_mcnemar(a, a, list(range(90))) == 1.0


def test_clustered_mcnemar_counts_a_cluster_once():
    """496 questions about 8 scenes all moving one way in 7 of them: plain McNemar sees hundreds of
    independent pairs, the clustered test sees eight clusters."""
    g = np.repeat(np.arange(8), 62)
    a = np.zeros(496)
    b = np.where(g < 7, (np.arange(496) % 2).astype(float), 0.0)
    b[g == 7] = 0
    a[(g == 7) & (np.arange(496) % 2 == 0)] = 1
    assert mcnemar(a, b) < 1e-30 < mcnemar(a, b, list(g))


def test_holm_and_bh_by_hand_and_against_statsmodels():
    """p = .01, .04, .03, .005 (m = 4): Holm sorted .005x4, .01x3, .03x2, .04x1 -> .02, .03, .06,
    .06 (monotone); BH .005x4/1, .01x4/2, .03x4/3, .04x4/4 -> .02, .02, .04, .04."""
    from statsmodels.stats.multitest import multipletests

    p = [0.01, 0.04, None, 0.03, 0.005, math.nan]
    assert holm(p) == pytest.approx([0.03, 0.06, None, 0.06, 0.02, None])
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, None, 0.04, 0.02, None])
    rng = np.random.default_rng(2)
    q = list(rng.random(30) ** 3)
    for ours, method in ((holm, "holm"), (benjamini_hochberg, "fdr_bh")):
        assert ours(q) == pytest.approx(list(multipletests(q, method=method)[1]))
    assert holm([]) == [] and adjusted_text(0.01, 0.03, True, 0.02, "True") == "0.01 (0.03*; 0.02*)"


def _row(difference, low, high, g=8, detectable=0.2, p=0.5):
    return {"difference": difference, "ci_low": low, "ci_high": high, "n_clusters": g,
            "clusters_are": "chains", "detectable": detectable, "p": p}  # fmt: skip


@pytest.mark.parametrize(
    "row, kind, words",
    [
        (_row(0.1, 0.02, 0.18), "better", "B is better: +0.100 [+0.020, +0.180] over 8 chains"),
        (_row(-0.1, -0.18, -0.02), "worse", "B is worse: -0.100 [-0.180, -0.020] over 8 chains"),
        (
            _row(0.05, -0.03, 0.13, detectable=0.123),
            "none detected",
            "no difference detected, and one of 0.123 or more would have been seen (80% power)",
        ),
        (_row(0.4, 0.3, 0.5, g=4), "too few clusters", "too few clusters to tell (4 chains;"),
        (_row(0.0, math.nan, math.nan, g=1), "too few clusters", "too few clusters to tell (1"),
    ],
)
def test_each_wording_follows_the_numbers(row, kind, words):
    got_kind, got = verdict(row)
    assert got_kind == kind and got.startswith(words)


def test_rows_below_the_floor_are_left_out_of_the_adjustment():
    rows = [{**_row(0.1, 0.02, 0.18, p=0.01)}, {**_row(0.4, 0.3, 0.5, g=3, p=0.001)}]
    for r in rows:
        r["verdict"] = verdict(r)[0]
    adjust(rows)
    assert rows[0]["p_holm"] == pytest.approx(0.01) and rows[0]["holm"] and rows[0]["bh"]
    assert rows[1]["p_holm"] is None and not rows[1]["holm"] and rows[1]["verdict"] == VERDICTS[3]


def test_clusters_are_named_by_the_images_they_hold():
    assert clusters_are([{"a.png", "a2.png"}, {"b.png"}]) == "chains"
    assert clusters_are([{"a.png"}, {"b.png"}]) == "images"
    assert clusters_are([set(), set()]) == "questions"


def test_the_coverage_simulation_rerun_small():
    """benchmarks/coverage.py at a few hundred replicates: the t interval covers near 95% at 8 and
    30 clusters, and at 8 clusters more often than the percentile bootstrap (which undercovers)."""
    from benchmarks.coverage import coverage

    at8 = coverage(8, replicates=400, seed=11)
    at30 = coverage(30, replicates=500, seed=12)
    assert 0.91 <= at8["cr2_t"] <= 0.99 and 0.91 <= at30["cr2_t"] <= 0.99
    assert at8["percentile"] < at8["cr2_t"] - 0.02
