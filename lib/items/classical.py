"""Classical item statistics over the bank, and the flags that mark an item worth a second look.

Per item (dataset, digest, item_id), from the respondents whose answer was scored:

- ``n``: how many respondents; ``p``: the share who got it right (its easiness: the classical
  "difficulty" index);
- ``discrimination``: the corrected point-biserial correlation between getting the item right and
  the respondent's accuracy on the dataset's *other* items (the item left out of its own total, so
  a short test does not correlate an item with itself); empty where every respondent scored alike
  or the totals do not vary;
- ``wrong_answer`` and ``wrong_share``: the most common wrong answer among valid answers, and the
  share of all scored respondents who gave it.

Flags (each false where too few respondents answered to say, see the constants):

- ``saturated``: every respondent right; it separates no one;
- ``never_right``: no respondent right: too hard, or a wrong key;
- ``negative_discrimination``: the stronger respondents get it wrong more often than the weaker;
- ``agreed_wrong``: the respondents agree on one wrong answer, the usual sign of a wrong key or
  an ambiguous question (independent mistakes scatter over the wrong options).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lib.items.bank import ITEM, responses

# Fewer respondents than this say nothing about an item as a whole: one or two models agreeing
# (on a right or a wrong answer) is chance, not a property of the item.
MIN_RESPONDENTS = 4
# A correlation over few respondents swings widely: its standard error is about 1/sqrt(n), so
# below ten respondents a clean item shows a negative value by chance too often to flag it.
MIN_DISCRIMINATION_RESPONDENTS = 10
# Flag below this: with ten or more respondents a correlation under -0.2 is rarely chance for a
# clean item (simulated 2PL items: a few in a hundred), while a wrong key sits far below it.
NEGATIVE_DISCRIMINATION = -0.2
# At least half the respondents giving one wrong answer: on a four-option question independent
# mistakes spread over three wrong options, so a half on one of them is agreement, not chance.
AGREED_WRONG_SHARE = 0.5
FLAGS = ("saturated", "never_right", "negative_discrimination", "agreed_wrong")
STAT_COLUMNS = (*ITEM, "task", "n", "p", "discrimination", "wrong_answer", "wrong_share", *FLAGS)


def corrected_point_biserial(matrix: np.ndarray) -> np.ndarray:
    """Per row (item) of a 0/1 matrix (items x respondents, NaN unanswered): the correlation
    across respondents between the item's score and the respondent's mean over their other
    answered items. NaN where either side does not vary or fewer than three answered."""
    answered = ~np.isnan(matrix)
    x = np.where(answered, matrix, 0.0)
    sums, counts = x.sum(axis=0), answered.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rest = np.where(answered & (counts > 1), (sums - x) / (counts - 1), np.nan)
    pair = answered & ~np.isnan(rest)
    n = pair.sum(axis=1)
    xs, rs = np.where(pair, x, np.nan), np.where(pair, rest, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = xs - np.nanmean(xs, axis=1, keepdims=True)
        dr = rs - np.nanmean(rs, axis=1, keepdims=True)
        cov = np.nansum(dx * dr, axis=1)
        r = cov / np.sqrt(np.nansum(dx**2, axis=1) * np.nansum(dr**2, axis=1))
    return np.where((n >= 3) & np.isfinite(r), r, np.nan)


def _by_dataset_discrimination(matrix: pd.DataFrame) -> pd.Series:
    """:func:`corrected_point_biserial` within each dataset version (its own respondents' totals)."""
    parts = [
        pd.Series(corrected_point_biserial(part.to_numpy(dtype=float)), index=part.index)
        for _, part in matrix.groupby(level=["dataset", "digest"], sort=False)
    ]
    return pd.concat(parts) if parts else pd.Series(dtype=float)


def wrong_answers(bank: pd.DataFrame) -> pd.DataFrame:
    """Per item: its most common wrong answer among valid scored answers (ties: the first in
    order), how many gave it, and how many respondents were scored in all."""
    scored = bank[bank["correct"].notna()]
    n = scored.groupby(list(ITEM)).size().rename("n")
    wrong = scored[~scored["correct"].astype(bool) & scored["valid"] & scored["answer"].notna()]
    counts = wrong.groupby([*ITEM, "answer"]).size().rename("count").reset_index()
    top = counts.sort_values("count", ascending=False, kind="stable").drop_duplicates(list(ITEM))
    top = top.set_index(list(ITEM)).rename(columns={"answer": "wrong_answer"})
    return pd.concat([n, top], axis=1).fillna({"count": 0})


def item_statistics(bank: pd.DataFrame) -> pd.DataFrame:
    """The statistics and flags of every item with a scored answer (:data:`STAT_COLUMNS`)."""
    if bank["correct"].notna().sum() == 0:
        return pd.DataFrame(columns=STAT_COLUMNS)
    matrix = responses(bank)
    task = bank.drop_duplicates(list(ITEM)).set_index(list(ITEM))["task"]
    wrong = wrong_answers(bank)
    stats = pd.DataFrame(
        {
            "task": task.reindex(matrix.index),
            "n": matrix.notna().sum(axis=1),
            "p": matrix.mean(axis=1),
            "discrimination": _by_dataset_discrimination(matrix).reindex(matrix.index),
            "wrong_answer": wrong["wrong_answer"].reindex(matrix.index),
            "wrong_share": (wrong["count"] / wrong["n"]).reindex(matrix.index),
        }
    )
    return flag(stats).reset_index()[list(STAT_COLUMNS)]


def flag(stats: pd.DataFrame) -> pd.DataFrame:
    """``stats`` with the :data:`FLAGS` columns set from its ``n``, ``p``, ``discrimination`` and
    ``wrong_share`` (the thresholds are this module's constants)."""
    enough = stats["n"] >= MIN_RESPONDENTS
    return stats.assign(
        saturated=enough & (stats["p"] == 1.0),
        never_right=enough & (stats["p"] == 0.0),
        negative_discrimination=(stats["n"] >= MIN_DISCRIMINATION_RESPONDENTS)
        & (stats["discrimination"] < NEGATIVE_DISCRIMINATION),
        agreed_wrong=enough & (stats["wrong_share"] >= AGREED_WRONG_SHARE),
    )


def flag_counts(stats: pd.DataFrame) -> pd.DataFrame:
    """Per dataset version: how many items, the most respondents any item had, and how many items
    carry each flag."""
    groups = stats.groupby(["dataset", "digest"], sort=True)
    counts = groups[list(FLAGS)].sum().astype(int)
    return pd.concat(
        [groups.size().rename("items"), groups["n"].max().rename("respondents"), counts], axis=1
    ).reset_index()
