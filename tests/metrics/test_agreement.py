"""Agreement of a scorer with people: each statistic held to a hand-worked case (not to the package
that computes it), intervals over images, and the paired comparison of two scorers."""

import math

import numpy as np
import pytest

from lib.metrics.rater_agreement import CATEGORICAL, GRADED, agreement, paired_agreement


def _value(rows, name):
    return next(r["value"] for r in rows if r["statistic"] == name)


def test_graded_statistics_by_hand():
    """Right answers 0.35 and 0.8, wrong ones 0.1 and 0.4: of the four (right, wrong) pairs three
    are ordered right (AUC 3/4); tau-b = (C - D) / sqrt((n0 - ties_x)(n0 - ties_y)) = 2 / sqrt(6 * 4)."""
    rows = agreement([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], n_resamples=50)
    assert _value(rows, "roc_auc") == pytest.approx(0.75)
    assert _value(rows, "kendall_tau_b") == pytest.approx(2 / math.sqrt(24))


def test_categorical_statistics_by_hand():
    """People 1 1 0 0 1 0, the judge 1 0 0 0 1 1: observed agreement 4/6, chance 1/2, kappa 1/3;
    alpha's coincidences o11 = o00 = 4, o10 = o01 = 2 (n = 12): 1 - 11 * 4 / (2 * 6 * 6) = 7/18."""
    rows = agreement([1, 0, 0, 0, 1, 1], [1, 1, 0, 0, 1, 0], statistics=CATEGORICAL, n_resamples=50)
    assert _value(rows, "cohen_kappa") == pytest.approx(1 / 3)
    assert _value(rows, "krippendorff_alpha") == pytest.approx(7 / 18)


def _answers(seed=0, images=30, per_image=5):
    rng = np.random.default_rng(seed)
    image = np.repeat(np.arange(images), per_image)
    right = (rng.random(len(image)) < 0.3).astype(int)
    return right + rng.normal(0, 0.6, len(image)), rng.random(len(image)), right, image


def test_each_figure_has_an_interval_over_images_around_it():
    good, _, right, image = _answers()
    for row in agreement(good, right, image, GRADED, n_resamples=200):
        assert (
            row["ci_low"] < row["value"] < row["ci_high"]
            and row["n"] == 150
            and row["n_clusters"] == 30
        )


def test_a_scorer_that_tracks_people_beats_noise_and_not_itself():
    good, noise, right, image = _answers()
    diff, low, high = paired_agreement(good, noise, right, image, n_resamples=200)
    assert diff > 0 and low > 0
    assert paired_agreement(good, good, right, image, n_resamples=50) == (0.0, 0.0, 0.0)


def test_a_statistic_undefined_on_the_answers_says_so():
    """All answers judged right: no AUC can be computed, and none is invented."""
    rows = agreement([0.2, 0.5, 0.9], [1, 1, 1], n_resamples=50)
    assert all(math.isnan(r["value"]) and math.isnan(r["ci_low"]) for r in rows)


@pytest.mark.parametrize(
    "scores, labels, why",
    [
        ([0.2, 0.5, 0.9], [1, 1, 1], "no negative label: people judged every answer yes"),
        ([0.2, 0.5, 0.9], [0, 0, 0], "no positive label: people judged every answer no"),
        ([0.5, 0.5, 0.5], [0, 1, 1], "the scorer gave every answer the same score"),
        ([0.5], [1], "one answer only both scored and labelled"),
        ([], [], "no answer both scored and labelled"),
    ],
)
def test_each_row_counts_both_classes_and_a_missing_value_says_why(scores, labels, why):
    r = agreement(scores, labels, statistics=("kendall_tau_b",), n_resamples=20)[0]
    assert (r["n_positive"], r["n_negative"]) == (sum(labels), len(labels) - sum(labels))
    assert math.isnan(r["value"]) and r["note"] == why
    row = agreement([0.1, 0.9], [0, 1], statistics=("roc_auc",), n_resamples=20)[0]
    assert row["value"] == 1.0 and row["note"] == ""


@pytest.mark.parametrize("seed", range(5))
def test_the_rank_auc_is_scikit_learns_ties_included(seed):
    """The AUC is computed from ranks for speed; scikit-learn's ``roc_auc_score`` is the reference,
    on scores with many ties (a judge's three ratings) and on continuous ones."""
    from sklearn.metrics import roc_auc_score

    from lib.metrics.rater_agreement import roc_auc

    rng = np.random.default_rng(seed)
    right = rng.random(97) < 0.3
    for scores in (rng.integers(0, 3, 97) / 2, rng.random(97), right + rng.normal(0, 0.8, 97)):
        assert roc_auc(scores, right) == pytest.approx(roc_auc_score(right, scores), abs=1e-12)
