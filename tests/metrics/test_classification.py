"""Classification, multiple-choice credit and bootstrap intervals."""

import math

import numpy as np
import pytest

from lib.metrics import classification
from lib.metrics.stats import bootstrap_ci, mean_ci


def test_invalid_answers_stay_in_every_denominator():
    gold = ["Y", "N", "Y", "N"]
    pred = ["Y", None, "Y", "Y"]  # one invalid
    assert classification.accuracy(gold, pred) == 0.5
    from sklearn.metrics import f1_score

    # invalid is never positive: as if it were a third label
    assert classification.binary_f1(gold, pred, "Y") == pytest.approx(
        f1_score(gold, ["Y", "X", "Y", "Y"], labels=["Y"], average="macro")
    )
    assert classification.binary_f1(gold, pred, "Y") == pytest.approx(
        2 * 1.0 * (2 / 3) / (1.0 + 2 / 3)
    )  # recall 1, precision 2/3
    assert classification.macro_f1(gold, pred) == pytest.approx(
        f1_score(gold, ["Y", "X", "Y", "Y"], labels=["N", "Y"], average="macro")
    )


def test_mcq_exact_and_jaccard_credit():
    gold = [[0, 2], [1], [], [3]]
    pred = [[0], [1], [], None]
    s = classification.mcq_scores(gold, pred)
    assert s["exact"] == [0.0, 1.0, 1.0, 0.0]
    assert s["jaccard"] == [0.5, 1.0, 1.0, 0.0]  # "none" answered "none" = full credit; invalid = 0


def test_micro_and_macro_over_question_types():
    scores = [1, 1, 1, 0, 0, 1]
    types = ["a", "a", "a", "a", "b", "b"]
    r = classification.per_type(scores, types)
    assert r["micro"] == pytest.approx(4 / 6)
    assert r["by_type"] == {"a": 0.75, "b": 0.5}
    assert r["macro"] == pytest.approx(0.625)


def test_bootstrap_intervals_are_deterministic_and_bracket_the_value():
    vals = [1.0] * 30 + [0.0] * 70
    v, lo, hi = mean_ci(vals, seed=3)
    assert v == pytest.approx(0.3) and lo < v < hi and lo > 0.18 and hi < 0.42
    assert mean_ci(vals, seed=3) == (v, lo, hi)
    assert mean_ci([1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0)
    assert all(math.isnan(x) for x in mean_ci([])) and math.isnan(mean_ci([0.5])[1])
    gold = ["Y", "N"] * 20 + ["N"] * 10
    pred = ["Y", "Y"] * 20 + [None, "N"] * 5
    for labels, reference in (
        (["Y"], classification.binary_f1(gold, pred, "Y")),
        (["Y", "N"], classification.macro_f1(gold, pred, ["Y", "N"])),
    ):
        stat, arrays = classification.f1_statistic(gold, pred, labels)
        f, flo, fhi = bootstrap_ci(stat, arrays, 200)
        assert (
            f == pytest.approx(reference) and flo < f < fhi
        )  # the vectorised F1 is scikit-learn's
    scores, types = [1, 1, 1, 0, 0, 1], ["a", "a", "a", "a", "b", "b"]
    stat, arrays = classification.macro_over_types_statistic(scores, types)
    assert bootstrap_ci(stat, arrays, 100)[0] == pytest.approx(
        classification.per_type(scores, types)["macro"]
    )


def test_a_means_interval_from_resampled_counts_is_the_index_bootstraps():
    """Resampling counts of the distinct scores gives the bootstrap distribution of resampling
    items: with many resamples both intervals agree to Monte Carlo error, for binary and
    three-valued scores; scores with many distinct values resample items (scipy) as before."""
    rng = np.random.default_rng(5)
    for values in (
        (rng.random(3000) < 0.3).astype(float),
        rng.choice([0.0, 0.5, 1.0], 3000, p=[0.5, 0.2, 0.3]),
    ):
        v, lo, hi = mean_ci(values, n_resamples=20_000, seed=1)
        iv, ilo, ihi = bootstrap_ci(lambda a: np.mean(a, axis=-1), [values], 20_000, seed=1)
        assert v == iv
        assert lo == pytest.approx(ilo, abs=2e-3) and hi == pytest.approx(ihi, abs=2e-3)
        assert hi - lo == pytest.approx(2 * 1.96 * values.std() / np.sqrt(len(values)), rel=0.05)
    spread = rng.random(500)  # 500 distinct scores: indices, the same numbers as bootstrap_ci
    assert mean_ci(spread, 300, seed=2) == bootstrap_ci(
        lambda a: np.mean(a, axis=-1), [spread], 300, seed=2
    )
