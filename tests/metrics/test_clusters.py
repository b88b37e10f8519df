"""Intervals that resample what is independent: the image (a cluster of questions), not the
question. Checked against statsmodels' cluster-robust standard error (an independent computation),
hand-worked cases, and the exact bootstrap distribution enumerated by brute force (with and without
the short-circuit to the question-level path when every item is its own cluster)."""

import itertools
import math

import numpy as np
import pytest

from lib.metrics.stats import bootstrap_ci, mean_ci, n_clusters


def _clustered(g: int = 60, seed: int = 1):
    """0/1 scores of questions about ``g`` images whose difficulty differs (answers about one
    image move together): the scores and each question's image."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 25, g)
    image = np.repeat(np.arange(g), sizes)
    p = rng.uniform(0.1, 0.9, g)
    return (rng.random(len(image)) < p[image]).astype(float), image


def _mean(a, axis=-1):
    return np.mean(a, axis=axis)


def test_the_clustered_interval_of_a_mean_matches_the_cluster_robust_standard_error():
    """statsmodels' OLS of the scores on a constant with cluster-robust (CR0) errors gives the
    standard error a cluster bootstrap of the mean estimates; the interval's half width is about
    1.96 of them, far wider than the question-level one here."""
    import statsmodels.api as sm

    x, image = _clustered()
    fit = sm.OLS(x, np.ones((len(x), 1))).fit(
        cov_type="cluster", cov_kwds={"groups": image, "use_correction": False}
    )
    value, low, high = mean_ci(x, n_resamples=20_000, clusters=image)
    assert value == pytest.approx(fit.params[0])
    assert (high - low) / 2 == pytest.approx(1.96 * fit.bse[0], rel=0.08)
    _, qlow, qhigh = mean_ci(x, n_resamples=20_000)
    assert (high - low) > 1.8 * (qhigh - qlow)


def test_a_hand_worked_case_two_images_bound_the_interval_by_their_means():
    """Two images: a resample is AA, AB, BA or BB (1/4, 1/2, 1/4), so its mean is image A's, the
    pooled mean or image B's, and the 95% interval runs from A's mean to B's."""
    x = np.array([0, 0, 0, 1] + [1, 1, 1, 1, 0, 1], dtype=float)  # A: 1/4, B: 5/6
    image = ["a"] * 4 + ["b"] * 6
    value, low, high = mean_ci(x, n_resamples=4000, clusters=image)
    assert (value, low, high) == pytest.approx((0.6, 0.25, 5 / 6))
    assert bootstrap_ci(_mean, [x], n_resamples=4000, clusters=image) == pytest.approx(
        (0.6, 0.25, 5 / 6)
    )


def test_a_paired_difference_resamples_the_same_images_in_both_runs():
    """Run B is run A with every answer about the first ten images flipped to right: the paired
    clustered interval of B - A matches the cluster-robust error of the per-question differences."""
    import statsmodels.api as sm

    a, image = _clustered(seed=2)
    b = np.where(image < 10, 1.0, a)
    diff = b - a
    fit = sm.OLS(diff, np.ones((len(diff), 1))).fit(
        cov_type="cluster", cov_kwds={"groups": image, "use_correction": False}
    )
    value, low, high = bootstrap_ci(
        lambda x, y: np.mean(y - x, axis=-1), [a, b], n_resamples=5000, clusters=image
    )
    assert value == pytest.approx(diff.mean())
    assert (high - low) / 2 == pytest.approx(1.96 * fit.bse[0], rel=0.12)


def _exact_interval(x: np.ndarray, clusters: list, confidence: float = 0.95) -> tuple:
    """The cluster bootstrap's interval by brute force, not through lib: every ordered draw of G
    clusters out of G (G**G, equally likely), each draw's pooled mean; the values where that
    distribution's CDF first reaches (1 - confidence) / 2 and (1 + confidence) / 2. The CDF must
    not sit near either level, so a bootstrap of 20,000 resamples lands on the same value."""
    keys = list(dict.fromkeys(clusters))
    parts = [x[[c == k for c in clusters]] for k in keys]
    means = [
        np.concatenate([parts[i] for i in draw]).mean()
        for draw in itertools.product(range(len(keys)), repeat=len(keys))
    ]
    values, counts = np.unique(np.round(means, 12), return_counts=True)
    cdf = np.cumsum(counts) / counts.sum()
    bounds = []
    for level in ((1 - confidence) / 2, (1 + confidence) / 2):
        assert np.abs(cdf - level).min() > 0.005, "the level sits on a jump: pick another case"
        bounds.append(float(values[np.searchsorted(cdf, level)]))
    return tuple(bounds)


@pytest.mark.parametrize(
    "clusters, hand",
    [
        # every answer its own image: the mean of 6 draws, 4 of them right -> k / 6, k ~ Bin(6, 2/3)
        (list("abcdef"), (1 / 3, 1.0)),
        # three images of two answers (0 0 | 1 1 | 1 1): k / 3, k ~ Bin(3, 2/3), P(k=0) = 1/27
        (list("aabbcc"), (0.0, 1.0)),
        # images of one, two and three answers (0 | 0 1 | 1 1 1)
        (list("abbccc"), None),
    ],
)
def test_the_interval_is_the_exact_bootstrap_whether_or_not_items_share_an_image(clusters, hand):
    """Each item its own cluster takes the question-level path (a short-circuit), shared images the
    cluster path: both must give the exact bootstrap interval, enumerated by brute force (and, for
    the first two, worked by hand), so a short-circuit taken when it should not be moves a bound."""
    x = np.array([0, 0, 1, 1, 1, 1], dtype=float)
    exact = _exact_interval(x, clusters)
    if hand is not None:
        assert exact == pytest.approx(hand)
    assert mean_ci(x, 20_000, clusters=clusters) == pytest.approx((2 / 3, *exact))
    assert bootstrap_ci(_mean, [x], 20_000, clusters=clusters) == pytest.approx((2 / 3, *exact))
    assert n_clusters(clusters, len(x)) == len(set(clusters))


def test_every_item_its_own_cluster_gives_the_binomial_bootstrap_of_a_proportion():
    """40 answers, 10 right, each its own image (and no clusters given): a resample's mean is
    k / 40 with k ~ Binomial(40, 1/4) - scipy's quantiles of it, an independent reference for the
    multinomial-count path the question-level bootstrap takes."""
    from scipy.stats import binom

    x = np.array([1.0] * 10 + [0.0] * 30)
    exact = (binom.ppf(0.025, 40, 0.25) / 40, binom.ppf(0.975, 40, 0.25) / 40)
    cdf = binom.cdf(np.array(exact) * 40, 40, 0.25)
    assert abs(cdf[0] - 0.025) > 0.005 and abs(cdf[1] - 0.975) > 0.005  # off a jump
    for clusters in (None, list(range(40))):
        assert mean_ci(x, 20_000, clusters=clusters) == pytest.approx((0.25, *exact))
    assert n_clusters(None, 40) == 40


def test_one_image_has_no_interval_and_keys_must_match_the_items():
    x = np.array([0.0, 1.0, 1.0])
    value, low, high = mean_ci(x, clusters=["a"] * 3)
    assert value == pytest.approx(2 / 3) and math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError, match="2 keys for 3 items"):
        mean_ci(x, clusters=["a", "b"])


def test_a_metric_row_names_its_clusters_and_resamples_them():
    from lib.tasks import Scoring, metric_row

    x, image = _clustered()
    row = metric_row(
        "all", "accuracy", x, len(x), 0, scoring=Scoring(n_resamples=500), clusters=image
    )
    assert row["n"] == len(x) and row["n_clusters"] == 60
    assert (row["value"], row["ci_low"], row["ci_high"]) == mean_ci(x, 500, clusters=image)
    plain = metric_row("all", "accuracy", x, len(x), 0, scoring=Scoring(n_resamples=500))
    assert (
        plain["n_clusters"] == len(x) and (plain["ci_low"], plain["ci_high"]) == mean_ci(x, 500)[1:]
    )


def test_each_task_names_what_its_answers_are_not_independent_of():
    """The image by default (MemeQA: the meme of up to 11 question types); YesBut: the two-panel
    image a description of a half or of the whole is of; Scrapbook: the image chain of a scene."""
    from lib.core.schema import Item
    from lib.tasks.registry import get_task

    def item(task, images, **meta):
        return Item(
            id=meta.pop("id", "x"), task=task, images=images, question="q", answer=["a"], meta=meta
        )

    assert get_task("mcq").cluster(item("mcq", ["memes/1.png"])) == "memes/1.png"
    yb = get_task("yesbut.understanding")
    halves = [
        item("yesbut.understanding", [f"halves/p7-{p}.png"], id=f"p7-{p}", part=p)
        for p in ("left", "right")
    ]
    assert {yb.cluster(it) for it in halves} == {
        yb.cluster(item(yb.name, ["p7.png"], id="p7-whole", part="whole"))
    }
    sb = get_task("scrapbook.qa")
    child = item(sb.name, ["images/s0_b0_a0_p0_x2.png"], image="s0_b0_a0_p0_x2", unit=[0, 0, 0, 0])
    root = item(sb.name, ["images/s0_b0_a0_p0_x1.png"], image="s0_b0_a0_p0_x1", unit=[0, 0, 0, 0])
    assert (
        sb.cluster(child)
        == sb.cluster(root)
        != sb.cluster(item(sb.name, ["i.png"], image="i", unit=[0, 0, 1, 0]))
    )


def test_an_interval_over_fewer_than_five_images_is_flagged_not_shown():
    """Two to four images give a bootstrap of a handful of distinct resamples: a table shows the
    value flagged, never an interval as if it held; from five images on, the interval."""
    from lib.metrics.stats import MIN_CLUSTERS, interval_text

    assert MIN_CLUSTERS == 5
    assert interval_text(0.5, 0.25, 0.75, 4) == "0.500 (too few images for an interval: 4)"
    assert interval_text(0.5, 0.25, 0.75, 5) == "0.500 [0.250, 0.750]"
    assert interval_text(-0.1, -0.2, 0.05, 9, fmt="+.3f") == "-0.100 [-0.200, +0.050]"
    assert interval_text(float("nan"), None, None, 9) == "n/a"
    assert interval_text(0.5, float("nan"), float("nan"), 9) == "0.500 (no interval)"
