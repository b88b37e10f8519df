"""Blind solvability: how well each question is answered from its text alone, without the image.

    scored = blind_reader(items)       # one row per item: p_blind, predicted, correct, ...
    table = blind_table(scored)        # per question type: blind accuracy [interval], chance, tells

A text-only reader is trained and scored k-fold on the dataset's own text, the folds grouped by
image (:func:`lib.items.text_features.image_folds`) so that questions about one image never sit on
both sides of a fold: every item is scored by a model that never saw it nor its image's other
questions. What it answers well is answerable without looking.

**Multiple choice** (single-answer items; ``meta.general_type == "multi"`` ones are skipped with
the reason): every option is a row, read as TF-IDF word and character n-grams of its text plus
the surface features of :mod:`lib.metrics.shortcuts` (each tell firing on it, length rank...;
:data:`lib.items.text_features.SURFACE`). A logistic regression scores each row as "the right
option"; the scores, softmaxed within the item, give ``p_blind`` (the probability of the right
option) and their argmax the reader's answer. **Open answers**: where the answers form a closed
set (at most :data:`MAX_OPEN_CLASSES` distinct normalised answers: yes/no, counts, colours), the
question's n-grams predict the answer's class (multinomial logistic regression) and ``p_blind``
is the probability of the right one; otherwise every open item is skipped with the reason.

Beside the reader each multiple-choice row carries the rule-based blind baseline's verdict (the
first of :data:`lib.metrics.shortcuts.BLIND_ORDER` that fires, else option A - the blind rows of
:func:`lib.metrics.shortcuts.audit`), which stays the *explanation* of what a tell gives away;
:func:`blind_table` puts both beside chance, each with an interval resampling images.

Readers (``kind``): ``"linear"`` (the above). A second reader - the project's text LLM scoring
each option by its log-likelihood after the question - would be a function of the same shape
(items, folds, seed -> rows) added to :data:`READERS`; it is not built.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from lib.items.text_features import NGrams, image_folds, standardised, surface_features
from lib.metrics.shortcuts import BLIND_ORDER, fires
from lib.metrics.stats import N_RESAMPLES, mean_ci

COLUMNS = (
    "item_id",
    "image",  # the cluster: every image of the item, joined by "|"; the id when it has none
    "type",
    "format",  # choice (multiple choice) | open
    "n_choices",  # options, or the closed set's classes
    "p_blind",  # the reader's probability of the right answer without the image
    "predicted",  # its answer: an option index, or an answer class
    "correct",
    "chance",
    "rule_correct",  # the rule-based blind baseline's verdict (multiple choice)
    "reason",  # why an item was not scored; empty when it was
)
FOLDS = 5
MAX_OPEN_CLASSES = 20  # more distinct open answers than this are free text, not a class to predict
C = 1.0  # inverse regularisation of both readers; the default, not tuned on any release
# the dual solver's stopping rule: at its default tolerance it stops at the iteration cap, unconverged,
# with the same answers to the fourth decimal; this one converges, in seconds
TOL, MAX_ITER = 1e-2, 1000


def image_of(item) -> str:
    """An item's cluster key: its images joined, or its id when it shows none."""
    return "|".join(item.images) or item.id


def type_of(item) -> str:
    """An item's question type, as the shortcut audit reads it."""
    return item.meta.get("specific_type") or item.meta.get("type") or "all"


def rule_pick(options: list[str]) -> int:
    """The rule-based blind baseline's answer: the first tell of BLIND_ORDER that fires, else A."""
    return next((k for t in BLIND_ORDER if (k := fires(t, options)) is not None), 0)


def _row(item, fmt: str, n_choices: int, **values) -> dict:
    row = {
        "item_id": item.id,
        "image": image_of(item),
        "type": type_of(item),
        "format": fmt,
        "n_choices": n_choices,
        "p_blind": np.nan,
        "predicted": None,
        "correct": np.nan,
        "chance": 1 / n_choices if n_choices else np.nan,
        "rule_correct": np.nan,
        "reason": "",
    }
    return {**row, **values}


# --- multiple choice ------------------------------------------------------------------------------


def _option_scores(items: list, folds: int, seed: int) -> np.ndarray | None:
    """Held-out scores of every option (items' options in order), or None with too few images."""
    sizes = np.array([len(it.options) for it in items])
    owner = np.repeat(np.arange(len(items)), sizes)
    texts = [o for it in items for o in it.options]
    right = np.array([float(k in it.answer) for it in items for k in range(len(it.options))])
    surface = np.vstack([surface_features(list(it.options), it.question) for it in items])
    grams = NGrams(texts)
    splits = image_folds([image_of(it) for it in items], folds, seed)
    if not splits:
        return None
    scores = np.zeros(len(texts))
    for train_items, test_items in splits:
        train = np.flatnonzero(np.isin(owner, train_items))
        test = np.flatnonzero(np.isin(owner, test_items))
        words_train, words_test = grams.fold(train, test)
        dense_train, dense_test = standardised(surface[train], surface[test])
        model = LogisticRegression(
            C=C, solver="liblinear", dual=True, max_iter=MAX_ITER, tol=TOL, random_state=seed
        )
        model.fit(sp.hstack([words_train, dense_train]).tocsr(), right[train])
        scores[test] = model.decision_function(sp.hstack([words_test, dense_test]).tocsr())
    return scores


def _within_items(scores: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """Each item's option scores softmaxed within the item."""
    out = []
    for chunk in np.split(scores, np.cumsum(sizes)[:-1]):
        e = np.exp(chunk - chunk.max())
        out.append(e / e.sum())
    return out


def _mcq_rows(items: list, folds: int, seed: int) -> list[dict]:
    """One row per multiple-choice item: the linear reader's and the rule-based verdicts."""
    is_single = [it.meta.get("general_type") != "multi" and len(it.answer) == 1 for it in items]
    single = [it for it, one in zip(items, is_single) if one]
    rows = [
        _row(
            it, "choice", len(it.options), reason="multi-answer: only single-answer items are read"
        )
        for it, one in zip(items, is_single)
        if not one
    ]
    scores = _option_scores(single, folds, seed) if single else None
    if scores is None:
        why = "fewer than two images: nothing to hold out"
        return rows + [_row(it, "choice", len(it.options), reason=why) for it in single]
    probs = _within_items(scores, np.array([len(it.options) for it in single]))
    for it, p in zip(single, probs):
        pick = int(np.argmax(p))
        rows.append(
            _row(
                it,
                "choice",
                len(it.options),
                p_blind=float(p[it.answer[0]]),
                predicted=pick,
                correct=float(pick == it.answer[0]),
                rule_correct=float(rule_pick(list(it.options)) == it.answer[0]),
            )
        )
    return rows


# --- open answers ---------------------------------------------------------------------------------


def answer_class(text: str) -> str:
    """An open answer as a class: lower case, spaces collapsed, a final full stop dropped."""
    return re.sub(r"\s+", " ", text.strip().lower()).removesuffix(".").strip()


def _open_rows(items: list, folds: int, seed: int) -> list[dict]:
    """One row per open item: the question-only reader's verdict, or why the items were skipped."""
    classes = [answer_class(it.answer[0]) if it.answer else "" for it in items]
    names = sorted(set(classes))
    splits = image_folds([image_of(it) for it in items], folds, seed)
    if len(names) > MAX_OPEN_CLASSES or len(names) < 2 or not splits:
        why = (
            f"open answers: {len(names)} distinct answers, not a closed set of 2 to "
            f"{MAX_OPEN_CLASSES}"
            if splits
            else "fewer than two images: nothing to hold out"
        )
        return [_row(it, "open", 0, reason=why) for it in items]
    y = np.array([names.index(c) for c in classes])
    grams = NGrams([it.question for it in items])
    probs = np.zeros((len(items), len(names)))
    for train, test in splits:
        x_train, x_test = grams.fold(train, test)
        model = LogisticRegression(C=C, max_iter=1000, random_state=seed).fit(x_train, y[train])
        probs[np.ix_(test, model.classes_)] = model.predict_proba(x_test)
    return [
        _row(
            it,
            "open",
            len(names),
            p_blind=float(p[k]),
            predicted=names[int(np.argmax(p))],
            correct=float(int(np.argmax(p)) == k),
        )
        for it, p, k in zip(items, probs, y)
    ]


READERS: dict[str, Callable[[list, int, int], list[dict]]] = {"linear": _mcq_rows}


def blind_reader(
    items: Sequence, kind: str = "linear", folds: int = FOLDS, seed: int = 0, dataset: str = ""
) -> pd.DataFrame:
    """One row per item (:data:`COLUMNS`, plus ``dataset``): its blind probability, the reader's
    answer and verdict, chance, the rule-based verdict, or the reason it was not scored.

    Args:
        items: one dataset's Items (multiple choice and open ones alike).
        kind: the reader (:data:`READERS`).
        folds: cross-fitting folds, grouped by image.
        seed: the folds' shuffle and the solver's.
    """
    if kind not in READERS:
        raise ValueError(
            f"blind_reader: unknown kind {kind!r}; built: {sorted(READERS)} (an 'llm' reader "
            "scoring options by the text model's log-likelihood is not built yet)"
        )
    if folds < 2:
        raise ValueError(f"blind_reader: folds must be at least 2, got {folds}")
    mcq = [it for it in items if it.options is not None]
    open_ = [it for it in items if it.options is None]
    rows = (READERS[kind](mcq, folds, seed) if mcq else []) + (
        _open_rows(open_, folds, seed) if open_ else []
    )
    order = {it.id: n for n, it in enumerate(items)}
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame = frame.sort_values("item_id", key=lambda s: s.map(order), kind="stable")
    return frame.reset_index(drop=True).assign(dataset=dataset)


# --- the table ------------------------------------------------------------------------------------


def _interval(values: pd.Series, images: pd.Series, n_resamples: int, seed: int) -> tuple:
    kept = values.notna()
    if not kept.any():
        return np.nan, np.nan, np.nan
    return mean_ci(
        values[kept].to_numpy(), n_resamples, seed=seed, clusters=list(images[kept].to_numpy())
    )


def _summary(group: pd.DataFrame, n_resamples: int, seed: int) -> dict:
    scored = group[group["reason"] == ""]
    blind = _interval(scored["correct"], scored["image"], n_resamples, seed)
    rule = _interval(scored["rule_correct"], scored["image"], n_resamples, seed)
    return {
        "n": len(scored),
        "images": scored["image"].nunique(),
        "skipped": int((group["reason"] != "").sum()),
        "blind": blind[0],
        "blind_low": blind[1],
        "blind_high": blind[2],
        "p_blind": scored["p_blind"].mean(),
        "chance": scored["chance"].mean(),
        "rule_based": rule[0],
        "rule_low": rule[1],
        "rule_high": rule[2],
    }


def blind_table(
    scored: pd.DataFrame, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> pd.DataFrame:
    """Per dataset, format and question type, and over all types (``type`` "all types"): the
    scored items and their images, the skipped ones, the reader's blind accuracy with its interval
    (resampling images), the mean ``p_blind``, chance (mean 1 / choices) and the rule-based blind
    baseline with its interval (multiple choice)."""
    rows = []
    for (dataset, fmt), part in scored.groupby(["dataset", "format"], sort=False):
        groups = [*sorted(part.groupby("type")), ("all types", part)]
        for qtype, group in groups:
            rows.append(
                {"dataset": dataset, "format": fmt, "type": qtype}
                | _summary(group, n_resamples, seed)
            )
    return pd.DataFrame(rows)
