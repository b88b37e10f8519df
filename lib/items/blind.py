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

Readers (``kind``, :data:`READERS`): ``"linear"`` (the above) and ``"llm"``, the project's text
LLM (:data:`LLM`, any model spec) as a second reader: each option scored by its log-likelihood
after the question (a ``loglik`` choice constraint through :func:`lib.models.generate`), softmaxed
within the item. It is asked zero-shot, so nothing is held out; what it knows of the world, not of
this dataset's habits, is what it brings.
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
from lib.models import Constraint, Request, generate, load_model

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
LLM = {"backend": "tiny", "name": "smollm2"}  # the project's text LLM, offline in every profile
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


def _single(items: list) -> tuple[list, list[dict]]:
    """(single-answer items, a skip row for each multi-answer one)."""
    is_single = [it.meta.get("general_type") != "multi" and len(it.answer) == 1 for it in items]
    why = "multi-answer: only single-answer items are read"
    skipped = [
        _row(it, "choice", len(it.options), reason=why)
        for it, one in zip(items, is_single)
        if not one
    ]
    return [it for it, one in zip(items, is_single) if one], skipped


def _choice_row(item, p: np.ndarray) -> dict:
    """A scored multiple-choice item: ``p`` its options' probabilities without the image."""
    pick, right = int(np.argmax(p)), item.answer[0]
    return _row(
        item,
        "choice",
        len(item.options),
        p_blind=float(p[right]),
        predicted=pick,
        correct=float(pick == right),
        rule_correct=float(rule_pick(list(item.options)) == right),
    )


def _linear_rows(items: list, folds: int, seed: int, **_) -> list[dict]:
    """One row per multiple-choice item: the linear reader's and the rule-based verdicts."""
    single, rows = _single(items)
    scores = _option_scores(single, folds, seed) if single else None
    if scores is None:
        why = "fewer than two images: nothing to hold out"
        return rows + [_row(it, "choice", len(it.options), reason=why) for it in single]
    probs = _within_items(scores, np.array([len(it.options) for it in single]))
    return rows + [_choice_row(it, p) for it, p in zip(single, probs)]


def _llm_rows(
    items: list, folds: int, seed: int, llm: dict | None = None, store=None
) -> list[dict]:
    """One row per multiple-choice item: each option's log-likelihood after the question under a
    text LLM (``llm``, a model spec; :data:`LLM` by default), softmaxed within the item. Nothing
    is trained, so nothing is held out: ``folds`` is not used. ``store``: a call store, so a
    rerun asks the model nothing it answered before."""
    single, rows = _single(items)
    distinct = [len(set(it.options)) == len(it.options) and all(it.options) for it in single]
    why = "empty or repeated options: a log-likelihood cannot tell them apart"
    rows += [
        _row(it, "choice", len(it.options), reason=why) for it, d in zip(single, distinct) if not d
    ]
    asked = [it for it, d in zip(single, distinct) if d]
    requests = [
        Request.simple(
            it.question, seed=seed, constraint=Constraint(tuple(it.options), method="loglik")
        )
        for it in asked
    ]
    answers = (
        generate(load_model(llm or LLM), requests, store=store, progress=False) if asked else []
    )
    for it, answer in zip(asked, answers):
        if not answer.scores:
            why = f"the model gave no scores ({answer.error or answer.problem or 'no reason'})"
            rows.append(_row(it, "choice", len(it.options), reason=why))
            continue
        scores = np.array([answer.scores[o] for o in it.options])
        rows.append(_choice_row(it, _within_items(scores, np.array([len(scores)]))[0]))
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
    try:
        grams = NGrams([it.question for it in items])
    except ValueError:  # no n-gram frequent enough in the questions (a handful of short ones)
        why = "open answers: the questions share no word or character n-gram to read"
        return [_row(it, "open", 0, reason=why) for it in items]
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


READERS: dict[str, Callable[..., list[dict]]] = {"linear": _linear_rows, "llm": _llm_rows}


def blind_reader(
    items: Sequence,
    kind: str = "linear",
    folds: int = FOLDS,
    seed: int = 0,
    dataset: str = "",
    llm: dict | None = None,
    store=None,
) -> pd.DataFrame:
    """One row per item (:data:`COLUMNS`, plus ``dataset``): its blind probability, the reader's
    answer and verdict, chance, the rule-based verdict, or the reason it was not scored.

    Args:
        items: one dataset's Items (multiple choice and open ones alike).
        kind: the multiple-choice reader (:data:`READERS`); open answers are read linearly.
        folds: cross-fitting folds, grouped by image.
        seed: the folds' shuffle and the solver's (the LLM's request seed).
        llm, store: the ``llm`` reader's model spec (:data:`LLM` by default) and call store.
    """
    if kind not in READERS:
        raise ValueError(f"blind_reader: unknown kind {kind!r}; known: {sorted(READERS)}")
    if folds < 2:
        raise ValueError(f"blind_reader: folds must be at least 2, got {folds}")
    mcq = [it for it in items if it.options is not None]
    open_ = [it for it in items if it.options is None]
    read = READERS[kind]
    rows = (read(mcq, folds, seed, llm=llm, store=store) if mcq else []) + (
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
