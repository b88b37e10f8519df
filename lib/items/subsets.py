"""Small subsets that keep the ranking: a tenth of a dataset's items whose accuracy estimates a
respondent's accuracy on the whole, checked by leaving each respondent out in turn.

The choice (:func:`choose`): the items are ranked by their share correct and cut into as many
strata of equal size as items are wanted; from each stratum the most discriminating item (corrected
point-biserial, :func:`lib.items.classical.corrected_point_biserial`) stands for it. So the subset
spans the dataset's difficulties as the whole does, and within a difficulty keeps the item that
best separates strong respondents from weak ones (a saturated, reversed or noisy item is passed
over). A respondent's estimate (:func:`estimate`) is the stratified mean: each chosen item's
answer weighted by the share of the dataset its stratum holds.

The check (:func:`check`), tinyBenchmarks' idea: for each respondent, the subset is chosen from the
*other* respondents' answers only, and the held-out respondent's estimate from it is set beside its
accuracy on all items. Reported: the mean absolute error, the largest error, Spearman's rank
correlation between estimates and full accuracies, and, for scale, the mean absolute error of
random subsets of the same size. Made only where at least :data:`MIN_RESPONDENTS` respondents
answered; otherwise the result says why, with no numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from lib.items.bank import responses
from lib.items.classical import corrected_point_biserial

FRACTION = 0.1  # a tenth of the items: tinyBenchmarks' scale (100 of about 1000)
# Leave-one-out needs others to rank the items by (difficulty and discrimination both come from
# them) and enough held-out respondents for a rank correlation to mean something.
MIN_RESPONDENTS = 10
RANDOM_DRAWS = 20  # random subsets per held-out respondent, for the baseline error
SUMMARY_COLUMNS = (
    "dataset",
    "digest",
    "subset",
    "subset_size",
    "subset_mae",
    "subset_spearman",
    "random_mae",
    "subset_reason",
)


@dataclass
class Subset:
    """Chosen items (the matrix's index values) and each one's weight: the share of all items its
    stratum stands for (the weights sum to 1)."""

    items: pd.Index
    weights: np.ndarray


@dataclass
class SubsetCheck:
    """The leave-one-respondent-out check of :func:`choose` on one dataset version: ``status`` is
    ``checked`` or why not (``reason``); ``respondents`` holds each one's full accuracy and
    estimate when checked."""

    status: str
    n_respondents: int
    n_items: int
    size: int = 0
    reason: str = ""
    mae: float = float("nan")
    max_error: float = float("nan")
    spearman: float = float("nan")
    random_mae: float = float("nan")
    respondents: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["full", "estimate"])
    )

    @property
    def checked(self) -> bool:
        return self.status == "checked"


def subset_size(n_items: int, fraction: float = FRACTION) -> int:
    """How many items a subset of ``fraction`` of ``n_items`` holds (at least one)."""
    return max(1, min(n_items, round(fraction * n_items)))


def choose(matrix: pd.DataFrame, fraction: float = FRACTION) -> Subset:
    """The subset of ``matrix``'s items (items x respondents, 1/0, NaN unanswered): one item per
    stratum of difficulty, the most discriminating of its stratum (ties: the first)."""
    values = matrix.to_numpy(dtype=float)
    p = np.nanmean(values, axis=1)
    discrimination = np.nan_to_num(corrected_point_biserial(values), nan=-np.inf)
    strata = np.array_split(np.argsort(p, kind="stable"), subset_size(len(p), fraction))
    chosen = [stratum[np.argmax(discrimination[stratum])] for stratum in strata]
    weights = np.array([len(s) for s in strata], dtype=float) / len(p)
    return Subset(matrix.index[chosen], weights)


def estimate(matrix: pd.DataFrame, subset: Subset) -> pd.Series:
    """Each respondent's estimated full-set accuracy: the stratified mean of its answers to the
    subset (weights renormalised over the items it answered)."""
    answers = matrix.loc[subset.items].to_numpy(dtype=float)
    w = np.where(np.isnan(answers), 0.0, subset.weights[:, None])
    with np.errstate(invalid="ignore"):
        est = (np.nan_to_num(answers) * w).sum(axis=0) / w.sum(axis=0)
    return pd.Series(est, index=matrix.columns)


def _random_error(matrix: pd.DataFrame, person, size: int, full: float, rng) -> float:
    """Mean absolute error of plain means over random subsets of ``size`` items for ``person``."""
    answers = matrix[person].to_numpy(dtype=float)
    picks = [rng.choice(len(answers), size, replace=False) for _ in range(RANDOM_DRAWS)]
    return float(np.mean([abs(np.nanmean(answers[k]) - full) for k in picks]))


def check(
    matrix: pd.DataFrame,
    fraction: float = FRACTION,
    min_respondents: int = MIN_RESPONDENTS,
    seed: int = 0,
) -> SubsetCheck:
    """Leave each respondent out, choose the subset from the others, estimate the held-out one's
    full-set accuracy from it; see the module's docstring for what is reported."""
    matrix = matrix.dropna(axis=1, how="all")
    n_items, n_people = matrix.shape
    if n_people < min_respondents:
        reason = f"not enough respondents (n = {n_people} < {min_respondents}) to check a subset"
        return SubsetCheck("not enough respondents", n_people, n_items, reason=reason)
    size, rng = subset_size(n_items, fraction), np.random.default_rng(seed)
    rows, random_errors = {}, []
    for person in matrix.columns:
        subset = choose(matrix.drop(columns=person), fraction)
        full = float(matrix[person].mean())
        rows[person] = (full, float(estimate(matrix[[person]], subset).iloc[0]))
        random_errors.append(_random_error(matrix, person, size, full, rng))
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["full", "estimate"])
    errors = (table["estimate"] - table["full"]).abs()
    return SubsetCheck(
        "checked",
        n_people,
        n_items,
        size,
        mae=float(errors.mean()),
        max_error=float(errors.max()),
        spearman=float(spearmanr(table["full"], table["estimate"]).statistic),
        random_mae=float(np.mean(random_errors)),
        respondents=table,
    )


def check_bank(bank: pd.DataFrame, fraction: float = FRACTION, seed: int = 0) -> dict:
    """:func:`check` per dataset version of the bank: ``(dataset, digest)`` -> :class:`SubsetCheck`."""
    matrix = responses(bank)
    return {
        key: check(part, fraction, seed=seed)
        for key, part in matrix.groupby(level=["dataset", "digest"], sort=True)
    }


def summary(checks: dict[tuple[str, str], SubsetCheck]) -> pd.DataFrame:
    """Per dataset version: the check's status, subset size, errors and rank correlation, or why
    no check was made."""
    rows = [
        {
            "dataset": dataset,
            "digest": digest,
            "subset": c.status,
            "subset_size": c.size,
            "subset_mae": c.mae,
            "subset_spearman": c.spearman,
            "random_mae": c.random_mae,
            "subset_reason": c.reason,
        }
        for (dataset, digest), c in checks.items()
    ]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
