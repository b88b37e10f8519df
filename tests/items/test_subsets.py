"""Small subsets that keep the ranking: one item per difficulty stratum, the most discriminating;
checked by leaving each respondent out; no check where respondents are too few."""

from __future__ import annotations

import numpy as np

from lib.items import subsets
from lib.items.classical import corrected_point_biserial
from tests.items import simulated

# 40 respondents x 200 items, a tenth (20 items), seed 0; measured: mean absolute error 0.058,
# rank correlation 0.90, random subsets of 20 items 0.083.
MAX_MAE = 0.08
MIN_SPEARMAN = 0.85


def test_a_subset_takes_the_most_discriminating_item_of_each_difficulty_stratum():
    matrix, _, _ = simulated.matrix(30, 100, seed=2)
    subset = subsets.choose(matrix, fraction=0.1)
    assert len(subset.items) == 10 and np.isclose(subset.weights.sum(), 1.0)
    p = matrix.mean(axis=1).to_numpy()
    order = np.argsort(p, kind="stable")
    r = corrected_point_biserial(matrix.to_numpy())
    for k, stratum in enumerate(np.array_split(order, 10)):
        assert matrix.index[stratum[np.nanargmax(r[stratum])]] == subset.items[k]


def test_a_tenth_estimates_each_left_out_respondent_and_keeps_the_ranking():
    matrix, _, _ = simulated.matrix(40, 200, seed=0)
    check = subsets.check(matrix)
    assert check.checked and check.size == 20 and len(check.respondents) == 40
    assert check.mae <= MAX_MAE and check.spearman >= MIN_SPEARMAN
    assert check.mae < 0.85 * check.random_mae  # the choice beats chance, not only luck


def test_the_left_out_respondent_never_chooses_its_own_items():
    """Its answers are not among those the subset is chosen from: changing them all changes its
    full accuracy and estimate, never which items the others chose."""
    matrix, _, _ = simulated.matrix(20, 60, seed=4)
    person = matrix.columns[0]
    before = subsets.choose(matrix.drop(columns=person))
    flipped = matrix.assign(**{person: 1 - matrix[person]})
    after = subsets.choose(flipped.drop(columns=person))
    assert list(before.items) == list(after.items)
    check = subsets.check(flipped, min_respondents=10)
    assert np.isclose(check.respondents.loc[person, "full"], 1 - matrix[person].mean())


def test_too_few_respondents_get_a_reason_not_numbers():
    matrix, _, _ = simulated.matrix(6, 50, seed=0)
    check = subsets.check(matrix)
    assert check.status == "not enough respondents" and np.isnan(check.mae)
    assert (
        check.reason
        == f"not enough respondents (n = 6 < {subsets.MIN_RESPONDENTS}) to check a subset"
    )


def test_a_check_per_dataset_of_the_bank():
    table, _, _ = simulated.bank(12, 50, seed=0)
    checks = subsets.check_bank(table)
    assert list(checks) == [("sim", "d1")] and checks[("sim", "d1")].checked
    summary = subsets.summary(checks)
    assert summary.loc[0, "subset_size"] == 5 and summary.loc[0, "subset"] == "checked"
