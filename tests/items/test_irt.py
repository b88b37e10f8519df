"""The 2PL fit: known parameters recovered from simulated answers within a stated tolerance,
reversed items found, and no numbers where respondents are too few."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import check_grad

from lib.items import irt
from tests.items import simulated

# 40 respondents x 200 items (seed 0): each item's difficulty rests on 40 answers, so its error
# is about 0.4 logits (the median standard error the fit reports); measured: correlation 0.92,
# mean absolute error 0.35, 91 % of the 95 % intervals holding the truth.
MIN_CORRELATION_B = 0.9
MAX_MAE_B = 0.45
MIN_COVERAGE_B = 0.85


def test_known_difficulties_are_recovered_within_the_tolerance():
    matrix, truth, theta = simulated.matrix(40, 200, seed=0)
    fit = irt.fit_matrix(matrix)
    assert fit.fitted and fit.converged
    b = fit.items["b"]
    assert np.corrcoef(b, truth["b"])[0, 1] >= MIN_CORRELATION_B
    assert (b - truth["b"]).abs().mean() <= MAX_MAE_B
    assert ((b - truth["b"]).abs() <= 1.96 * fit.items["b_se"]).mean() >= MIN_COVERAGE_B
    assert np.corrcoef(fit.abilities, theta)[0, 1] >= 0.95
    assert np.corrcoef(fit.items["a"], truth["a"])[0, 1] > 0.3  # a, from 40 answers, roughly


def test_reversed_items_get_a_negative_discrimination():
    """Ten yes/no items keyed the wrong way round: the fit must find the mode with a < 0 (from
    a = 1 it would settle on the other, a very hard item of small positive a)."""
    matrix, items, _ = simulated.matrix(40, 200, seed=0)
    planted = items.index[items["b"].abs() < 1][:10]
    matrix.loc[planted] = 1 - matrix.loc[planted]
    a = irt.fit_matrix(matrix).items["a"]
    assert (a[planted] < 0).sum() >= 8 and (a.drop(planted) < 0).sum() <= 2


def test_the_gradients_are_the_objectives():
    matrix, _, _ = simulated.matrix(6, 5, seed=1)
    y, seen = matrix.to_numpy(), np.ones(matrix.shape, dtype=bool)
    seen[0, 0] = False
    rng = np.random.default_rng(0)
    x, theta = rng.normal(size=6 + 2 * 5), rng.normal(size=6)

    def joint(x):
        return irt._negative_log_posterior(x, y, seen, 5, 6)

    def items(x):
        value, grad = irt._item_objective(x[:5], x[5:], theta, y, seen)
        return value.sum(), grad

    for f, at in ((joint, x), (items, x[6:])):
        error = check_grad(lambda v, f=f: f(v)[0], lambda v, f=f: f(v)[1], at)
        assert error < 1e-5 * np.linalg.norm(f(at)[1])


def test_too_few_respondents_get_a_reason_not_numbers():
    table, _, _ = simulated.bank(4, 30, seed=0)
    fits = irt.fit(table)
    fit = fits[("sim", "d1")]
    assert not fit.fitted and fit.items.empty and fit.abilities.empty
    assert fit.reason == f"not enough respondents (n = 4 < {irt.MIN_PATTERNS}) for a 2PL fit"
    summary = irt.summary(fits)
    assert (
        summary["irt"].tolist() == ["not enough respondents"] and summary["reversed"].isna().all()
    )
    assert irt.item_parameters(fits).empty


def test_a_fit_per_dataset_over_its_own_respondents():
    first, _, _ = simulated.bank(25, 40, seed=0)
    second, _, _ = simulated.bank(4, 10, seed=1, dataset="small")
    fits = irt.fit(pd.concat([first, second]))
    assert fits[("sim", "d1")].fitted and fits[("sim", "d1")].n_respondents == 25
    assert not fits[("small", "d1")].fitted
    params = irt.item_parameters(fits)
    assert len(params) == 40 and set(params["dataset"]) == {"sim"}
