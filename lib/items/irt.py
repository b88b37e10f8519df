"""A two-parameter logistic (2PL) item response model fitted to the bank's right/wrong answers.

P(respondent j gets item i right) = sigmoid(a_i * (theta_j - b_i)): ``theta`` is a respondent's
ability, ``b`` an item's difficulty (the ability at which half get it right), ``a`` its
discrimination (how sharply the chance rises with ability; negative when the stronger respondents
do worse, the mark of a wrong key).

Own fit, with scipy, rather than a package: neither girth nor py-irt is a dependency of the project;
girth's last release dates from 2021, and py-irt brings Pyro and fits by stochastic variational
inference (its numbers move with the seed and the number of steps). A joint maximum a posteriori
fit is a few dozen lines over :func:`scipy.optimize.minimize` (L-BFGS-B with the analytic
gradient) and gives the same answer on every run. Abilities and item parameters maximise the
likelihood times light normal priors: theta ~ N(0, 1) (which fixes the scale), b ~ N(0,
:data:`PRIOR_SD_B`), and a ~ N(1, :data:`PRIOR_SD_A`) left free in sign, so a wrong key shows as a
negative ``a`` instead of being squeezed towards zero as a log-normal prior would. An item's
posterior then has a mode on each side of a = 0 (a reversed item also fits, worse, as a very hard
one), so every item is also tried from the other sign (:func:`_other_sign`). The priors keep the
parameters of items everyone (or no one) got right finite.

Uncertainty: standard errors from each item's Fisher information in (a, b), abilities held at
their estimates and the priors' curvature added (a 2x2 matrix per item, so a bank of any size costs
one pass). Holding the abilities fixed understates the error a little; with few respondents the
prior dominates, which is why no fit is made below :data:`MIN_PATTERNS` respondents.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import expit

from lib.items.bank import ITEM, responses

# Below this many respondents (models x styles x runs) an item's two parameters rest on too few
# answers: its difficulty is known to about +/- 1/sqrt(n) logits at best, and its discrimination
# is mostly the prior. Twenty answers per item is the least at which both say something.
MIN_PATTERNS = 20
PRIOR_SD_A = 1.0  # discrimination ~ N(1, 1): typical items a in 0.5..2, a wrong key below zero
PRIOR_SD_B = 2.0  # difficulty ~ N(0, 2): wide enough for items at the ends of any real test
MAX_ITERATIONS = 2000  # a cap on L-BFGS-B's steps; it stops at convergence long before
ITEM_COLUMNS = ("a", "a_se", "b", "b_se")
SUMMARY_COLUMNS = (
    "dataset",
    "digest",
    "irt",
    "irt_respondents",
    "irt_converged",
    "reversed",
    "irt_reason",
)


@dataclass
class IrtFit:
    """One 2PL fit: ``status`` is ``fitted`` or why not (``reason``); when fitted, ``items`` holds
    per item a, its standard error, b and its standard error (index: the bank's item key), and
    ``abilities`` each respondent's theta."""

    status: str
    n_respondents: int
    n_items: int
    reason: str = ""
    converged: bool = False
    items: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ITEM_COLUMNS))
    abilities: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))

    @property
    def fitted(self) -> bool:
        return self.status == "fitted"


def _negative_log_posterior(params, y, seen, n_items, n_people):
    """The objective and its gradient over (theta, a, b) for responses ``y`` (0/1; ``seen``
    marks which were given)."""
    theta = params[:n_people]
    a = params[n_people : n_people + n_items]
    b = params[n_people + n_items :]
    gap = theta[None, :] - b[:, None]
    z = a[:, None] * gap
    # log-likelihood of a Bernoulli with logit z: y*z - log(1 + e^z), stable for large |z|
    loglik = np.where(seen, y * z - np.logaddexp(0.0, z), 0.0).sum()
    prior = (theta**2).sum() / 2 + ((a - 1) ** 2).sum() / (2 * PRIOR_SD_A**2)
    prior += (b**2).sum() / (2 * PRIOR_SD_B**2)
    residual = np.where(seen, y - expit(z), 0.0)
    grad_theta = -(residual * a[:, None]).sum(axis=0) + theta
    grad_a = -(residual * gap).sum(axis=1) + (a - 1) / PRIOR_SD_A**2
    grad_b = (residual.sum(axis=1)) * a + b / PRIOR_SD_B**2
    return prior - loglik, np.concatenate([grad_theta, grad_a, grad_b])


def _standard_errors(theta, a, b, seen) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the standard errors of a and b: the inverse of its 2x2 Fisher information in
    (a, b), abilities held at their estimates, the priors' curvature added."""
    gap = theta[None, :] - b[:, None]
    w = np.where(seen, expit(a[:, None] * gap), 0.0)
    w = w * (1 - w)
    i_aa = (w * gap**2).sum(axis=1) + 1 / PRIOR_SD_A**2
    i_ab = -a * (w * gap).sum(axis=1)
    i_bb = a**2 * w.sum(axis=1) + 1 / PRIOR_SD_B**2
    det = i_aa * i_bb - i_ab**2
    return np.sqrt(i_bb / det), np.sqrt(i_aa / det)


def _item_objective(a, b, theta, y, seen):
    """Per item, its part of the negative log posterior (abilities fixed), and the gradient of
    their sum over (a, b)."""
    gap = theta[None, :] - b[:, None]
    z = a[:, None] * gap
    value = -np.where(seen, y * z - np.logaddexp(0.0, z), 0.0).sum(axis=1)
    value += (a - 1) ** 2 / (2 * PRIOR_SD_A**2) + b**2 / (2 * PRIOR_SD_B**2)
    residual = np.where(seen, y - expit(z), 0.0)
    grad_a = -(residual * gap).sum(axis=1) + (a - 1) / PRIOR_SD_A**2
    grad_b = residual.sum(axis=1) * a + b / PRIOR_SD_B**2
    return value, np.concatenate([grad_a, grad_b])


def _other_sign(theta, a, b, y, seen) -> tuple[np.ndarray, np.ndarray, bool]:
    """Each item refitted from the other sign of ``a`` (abilities fixed), kept where that fits
    better: an item's posterior has a mode on each side of a = 0 (a reversed item also fits as a
    very hard one), and a fit started at a = 1 finds only the positive one. Also says whether any
    item changed."""
    n = len(a)

    def total(x):
        value, grad = _item_objective(x[:n], x[n:], theta, y, seen)
        return value.sum(), grad

    found = minimize(total, np.concatenate([-a, -b]), jac=True, method="L-BFGS-B")
    a2, b2 = found.x[:n], found.x[n:]
    better = _item_objective(a2, b2, theta, y, seen)[0] < _item_objective(a, b, theta, y, seen)[0]
    return np.where(better, a2, a), np.where(better, b2, b), bool(better.any())


def _joint(start, y, seen, n_items, n_people):
    found = minimize(
        _negative_log_posterior,
        start,
        args=(y, seen, n_items, n_people),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": MAX_ITERATIONS},
    )
    theta, a, b = np.split(found.x, [n_people, n_people + n_items])
    return theta, a, b, bool(found.success)


def fit_matrix(matrix: pd.DataFrame, min_patterns: int = MIN_PATTERNS) -> IrtFit:
    """The 2PL fit of a response matrix (items x respondents, 1/0, NaN unanswered); a
    ``not enough respondents`` result, with no numbers, below ``min_patterns`` respondents.
    Fitted jointly from a = 1, then each item tried from the other sign of a
    (:func:`_other_sign`) and, where any item moved, jointly again from there."""
    n_items, n_people = matrix.shape
    if n_people < min_patterns:
        return IrtFit(
            "not enough respondents",
            n_people,
            n_items,
            f"not enough respondents (n = {n_people} < {min_patterns}) for a 2PL fit",
        )
    if n_items == 0:
        return IrtFit("no items", n_people, 0, "no scored answers to fit")
    y = matrix.to_numpy(dtype=float)
    seen = ~np.isnan(y)
    y = np.where(seen, y, 0.0)
    start = np.concatenate([np.zeros(n_people), np.ones(n_items), np.zeros(n_items)])
    theta, a, b, converged = _joint(start, y, seen, n_items, n_people)
    a, b, moved = _other_sign(theta, a, b, y, seen)
    if moved:
        theta, a, b, converged = _joint(np.concatenate([theta, a, b]), y, seen, n_items, n_people)
    a_se, b_se = _standard_errors(theta, a, b, seen)
    items = pd.DataFrame({"a": a, "a_se": a_se, "b": b, "b_se": b_se}, index=matrix.index)
    abilities = pd.Series(theta, index=matrix.columns, name="theta")
    return IrtFit("fitted", n_people, n_items, "", converged, items, abilities)


def fit(bank: pd.DataFrame, min_patterns: int = MIN_PATTERNS) -> dict[tuple[str, str], IrtFit]:
    """One 2PL fit per dataset version of the bank (``(dataset, digest)`` -> :class:`IrtFit`),
    each over the respondents who answered it."""
    matrix = responses(bank)
    return {
        key: fit_matrix(part.dropna(axis=1, how="all"), min_patterns)
        for key, part in matrix.groupby(level=["dataset", "digest"], sort=True)
    }


def summary(fits: dict[tuple[str, str], IrtFit]) -> pd.DataFrame:
    """Per dataset version: the fit's status, respondents, items, whether it converged and how
    many items it found reversed (a < 0: the stronger respondents do worse), or why no fit."""
    rows = [
        {
            "dataset": dataset,
            "digest": digest,
            "irt": f.status,
            "irt_respondents": f.n_respondents,
            "irt_converged": f.converged,
            "reversed": int((f.items["a"] < 0).sum()) if f.fitted else None,
            "irt_reason": f.reason,
        }
        for (dataset, digest), f in fits.items()
    ]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def item_parameters(fits: dict[tuple[str, str], IrtFit]) -> pd.DataFrame:
    """Every fitted item's a, b and their standard errors, with its key columns."""
    frames = [f.items for f in fits.values() if f.fitted]
    if not frames:
        return pd.DataFrame(columns=[*ITEM, *ITEM_COLUMNS])
    return pd.concat(frames).reset_index()
