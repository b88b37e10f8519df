"""Answers drawn from a two-parameter logistic model with known parameters, as a response matrix
or as an item bank of four-option questions (with wrong keys planted on request): what the item
statistics, the IRT fit and the subsets are checked against."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from scipy.special import expit

from lib.items.bank import COLUMNS

OPTIONS = ("A", "B", "C", "D")


def truth(n_people: int, n_items: int, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    """Items' true ``a`` and ``b`` (log a ~ N(0, 0.3), b ~ U(-2, 2)) and abilities (N(0, 1))."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_people)
    items = pd.DataFrame(
        {"a": np.exp(rng.normal(0, 0.3, size=n_items)), "b": rng.uniform(-2, 2, size=n_items)},
        index=pd.Index([f"q{i:04d}" for i in range(n_items)], name="item_id"),
    )
    return items, pd.Series(theta, index=[f"r{j:03d}" for j in range(n_people)])


def knows(items: pd.DataFrame, theta: pd.Series, seed: int = 0) -> np.ndarray:
    """Who knows the right answer (items x respondents, bool), drawn from the 2PL."""
    rng = np.random.default_rng(seed + 1)
    chance = expit(
        items["a"].to_numpy()[:, None] * (theta.to_numpy() - items["b"].to_numpy()[:, None])
    )
    return rng.random(chance.shape) < chance


def matrix(n_people: int, n_items: int, seed: int = 0):
    """(responses items x respondents as 1.0/0.0, true item parameters, true abilities)."""
    items, theta = truth(n_people, n_items, seed)
    y = knows(items, theta, seed).astype(float)
    return pd.DataFrame(y, index=items.index, columns=theta.index), items, theta


def bank(n_people: int, n_items: int, seed: int = 0, wrong_keys=(), dataset="sim", digest="d1"):
    """An item bank of four-option questions: a respondent who knows an item gives its right
    answer, one who does not picks one of the three others at random. ``wrong_keys`` (item ids)
    are keyed on another option than the right one, so those who know them are marked wrong."""
    items, theta = truth(n_people, n_items, seed)
    rng = np.random.default_rng(seed + 2)
    right = rng.integers(0, 4, size=n_items)
    key = right.copy()
    planted = items.index.isin(list(wrong_keys))
    key[planted] = (right[planted] + rng.integers(1, 4, size=planted.sum())) % 4
    other = (right[:, None] + rng.integers(1, 4, size=(n_items, n_people))) % 4
    chosen = np.where(knows(items, theta, seed), right[:, None], other)
    rows = [
        {
            "dataset": dataset,
            "digest": digest,
            "item_id": item,
            "task": "mcq",
            "run": "sim",
            "model": person,
            "style": "zero_shot",
            "correct": bool(chosen[i, j] == key[i]),
            "valid": True,
            "answer": json.dumps(OPTIONS[chosen[i, j]]),
            "source": "",
        }
        for i, item in enumerate(items.index)
        for j, person in enumerate(theta.index)
    ]
    frame = pd.DataFrame(rows, columns=list(COLUMNS)).astype({"correct": "boolean"})
    return frame, items, theta
