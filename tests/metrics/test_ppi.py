"""lib.metrics.ppi: a judge's accuracy corrected by people (prediction-powered inference), checked
against a hand-worked case, the reference package where it is installed, and by simulation."""

import math

import numpy as np
import pytest

from benchmarks.ppi import coverage
from lib.metrics import ppi
from lib.metrics.stats import mean_ci

# four labelled answers (people's verdict, the judge's score) and six the judge alone scored
HUMAN, JUDGE, UNLABELLED = [1, 0, 1, 1], [1, 1, 0, 1], [1, 0, 1, 1, 1, 0]
Z95 = 1.959963984540054  # the normal quantile at 0.975


def test_the_paper_interval_by_hand():
    """Judge mean on the unlabelled answers 4/6, rectifier (people - judge) 0, -1, 1, 0: mean 0,
    variance 1/2; the judge's variance 2/9: SE = sqrt(2/9 / 6 + 1/2 / 4) = sqrt(35/216)."""
    estimate, low, high = ppi.ppi_mean_ci(HUMAN, JUDGE, UNLABELLED)
    se = math.sqrt(35 / 216)
    assert estimate == pytest.approx(2 / 3)
    assert (low, high) == pytest.approx((2 / 3 - Z95 * se, 2 / 3 + Z95 * se))


def test_lam_zero_is_peoples_mean_alone_and_the_judge_then_buys_nothing():
    estimate, low, high = ppi.ppi_mean_ci(HUMAN, JUDGE, UNLABELLED, lam=0.0)
    se = math.sqrt(np.var(HUMAN) / 4)  # the classical interval, ddof 0 as the paper's
    assert (estimate, low, high) == pytest.approx((0.75, 0.75 - Z95 * se, 0.75 + Z95 * se))


@pytest.mark.parametrize("lam", [1.0, 0.4])
def test_the_default_is_the_reference_packages_interval(lam):
    """ppi_py (pip install ppi-python) on data it did not see before: the same interval."""
    import ppi_py  # a dev dependency: the reference, never skipped

    rng = np.random.default_rng(3)
    y = (rng.random(60) < 0.4).astype(float)
    f = np.where(rng.random(60) < 0.7, y, 1 - y)
    unlabelled = (rng.random(500) < 0.5).astype(float)
    want = ppi_py.ppi_mean_ci(y, f, unlabelled, alpha=0.05, lam=lam)
    _, low, high = ppi.ppi_mean_ci(y, f, unlabelled, lam=lam)
    assert (low, high) == pytest.approx((float(want[0][0]), float(want[1][0])))


def test_clusters_count_an_images_copies_as_one_unit():
    """Every answer copied five times into its own image: the paper's interval, holding the copies
    independent, narrows by about sqrt(5); the clustered one stays as wide as on the originals."""
    rng = np.random.default_rng(0)
    y = (rng.random(40) < 0.4).astype(float)
    f = np.where(rng.random(40) < 0.7, y, 1 - y)
    u = (rng.random(200) < 0.5).astype(float)
    at, at_u = np.arange(40), np.arange(40, 240)
    once = ppi.ppi_mean_ci(y, f, u, clusters=at, clusters_unlabelled=at_u, n_resamples=2000)
    copies = [np.repeat(a, 5) for a in (y, f, u, at, at_u)]
    paper = ppi.ppi_mean_ci(*copies[:3])
    clustered = ppi.ppi_mean_ci(
        *copies[:3], clusters=copies[3], clusters_unlabelled=copies[4], n_resamples=2000
    )
    width = once[2] - once[1]
    assert clustered[0] == pytest.approx(once[0])
    assert clustered[2] - clustered[1] == pytest.approx(width, rel=0.1)
    assert paper[2] - paper[1] == pytest.approx(width / math.sqrt(5), rel=0.1)


def test_held_out_keeps_a_share_at_random_and_the_same_for_a_seed():
    kept = ppi.held_out(150, seed=1)
    assert kept.sum() == 50 and (kept == ppi.held_out(150, seed=1)).all()
    assert (kept != ppi.held_out(150, seed=2)).any() and ppi.held_out(3).sum() == 2


def test_corrected_sets_the_estimates_beside_peoples_mean_on_every_answer():
    rng = np.random.default_rng(0)
    clusters = np.repeat(np.arange(30), 5)
    y = (rng.random(150) < 0.3).astype(float)
    judge = np.ones(150)  # a judge that calls every answer right: its raw accuracy is 1
    row = ppi.corrected(judge, y, clusters, ppi.held_out(150), n_resamples=200)
    assert row["judge_raw"] == 1.0 and row["human_all"] == pytest.approx(y.mean())
    # a constant judge carries no information: corrected is people's mean on the kept labels
    assert row["corrected"] == pytest.approx(row["human_only"])
    kept = ppi.held_out(150)
    assert row["human_only"] == pytest.approx(y[kept].mean()) and row["n_labelled"] == 50
    assert row["human_only"] == mean_ci(y[kept], 200, clusters=clusters[kept])[0]


def _band(found, method):
    return found[method]["coverage"]


def test_by_simulation_the_clustered_interval_covers_where_the_papers_does_not():
    """People label whole images (every answer of 20 of 200 images, 15 answers each): the paper's
    interval, holding answers independent, covers far less than 95%; ours, resampling images,
    covers within the band a 150-run simulation allows (3 binomial SEs and the bootstrap's
    few-cluster shortfall: 0.89 to 0.99); the judge's raw mean, lenient, almost never."""
    found = coverage(200, 15, 300, reps=150, n_resamples=200, whole_images=True)
    assert 0.89 <= _band(found, "ppi_clustered") <= 0.99
    assert _band(found, "ppi_paper") < 0.85
    assert _band(found, "judge_raw") < 0.2


def test_by_simulation_both_cover_answers_labelled_at_random_like_yesbuts():
    """YesBut's shape (30 images, 5 answers each, 50 labelled at random): both corrected intervals
    cover within the band; the raw judge does not."""
    found = coverage(30, 5, 50, reps=150, n_resamples=200)
    assert 0.89 <= _band(found, "ppi_clustered") <= 0.99
    assert 0.89 <= _band(found, "ppi_paper") <= 0.99
    assert _band(found, "judge_raw") < 0.2
