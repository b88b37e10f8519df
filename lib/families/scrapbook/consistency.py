"""The Scrapbook evaluation protocol (paper sections 7-8), rule by rule.

This module reads one answer (:func:`read_answer`: matching per form, the individual categories),
names a query (:func:`query_id`) and writes the rows of the protocol's tables; the group rules
below (precedence, aggregated categories, consistency, level gating) run in
:mod:`lib.families.scrapbook.coded` on a group's answers held as integer codes, what stage 06 and
:class:`lib.families.scrapbook.task.ScrapbookQA` score with. An answer is read from its question
(image, parent image, query, paraphrase, type, form, level, concepts, subgroup, absurd, expected
answer), the model's raw output (None for a failed call) and the question's answer vocabulary
(``space``: the enumerated alternatives).

**A question** (the paper's unit: its counts 69, 33, 207, 537 are multiples of 3 paraphrases) is
one paraphrase of one query on one image; its four *versions* are its forms (original, condition,
direction, enumerated).

**Matching per form** (section 7) - original and direction: the expected answer is *contained*
in the output; condition and enumerated: the raw output *equals* it (``exact="paper"``: outer
spaces and letter case ignored, nothing else; ``exact="words"`` is our lenient reading:
punctuation dropped, number words as digits). Containment reads every synonym the generator
itself uses ("upper left" and "left half" for regions, "grey" for gray: :func:`synonyms`), and so
does the condition form; the enumerated form needs one of the listed alternatives. An expected
``<unk>`` (presupposition failure) is matched by "not applicable", the phrase the enumerated form
offers, or by ``<unk>``.

**Error categories** (one per answer): ``wrong answer`` (exactly one plausible answer - one of the
space - and not the expected one), ``more than one answer`` (several plausible answers, e.g.
"yes and no"), ``unexpected answer`` (no plausible answer; under the exact forms also the right
answer buried in other text), ``invalidated by simpler image`` (correct, but the same query in the
same form is answered wrong on an ancestor image - an image with fewer objects it was built from).

**Aggregated categories** (per question, from its versions' answers): every version correct ->
correct; every version wrong with *the same* plausible answer -> ``wrong answer``; every answer
plausible but not all the same (correct and wrong, or different wrong answers: four wrong colours)
-> ``answer disagreement``; one other category throughout -> that category; else ``error
disagreement``. A question correct in every version is *invalidated by simpler image* when the
same query is answered wrong (some paraphrase not correct in every version) on an ancestor image:
so Corrects - Corrects* = Invalidated, as in the paper's Tables 8-15.

**Consistency** (section 7, after Hudson and Manning) is per *query on an image*, its paraphrases
in every form pooled, consistent when right at least ``THRESHOLD`` (0.8) of the
time. The five accuracy approaches are each form's accuracy over answers and the all-versions
accuracy over questions.

**Level gating** (section 5.1): presence and counting questions (non-absurd). A level-1 concept -
or at a higher level the concepts new there, or the combination when nothing is new ("gray
pentagon") - passes when the data *enables* it (for each of presence and counting, questions where
it is present, subgroup 1, and absent, subgroups 2+) and every (type, subgroup) of its gated
questions is answered correctly in all versions at least ``threshold`` of the time. A question of a
higher level is evaluated only when every concept it shares with lower levels passed there; a
reference object's concept is the same concept (``reference_shape:square`` is ``shape:square``).
A model that always says "no" passes nothing.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

DATA = Path(__file__).with_name("data")  # the family's templates, vocabulary and expressions


CORRECT = "correct"
WRONG = "wrong answer"
MULTIPLE = "more than one answer"
UNEXPECTED = "unexpected answer"
INVALIDATED = "invalidated by simpler image"
ANSWER_DISAGREEMENT = "answer disagreement"
ERROR_DISAGREEMENT = "error disagreement"
CATEGORIES = (WRONG, MULTIPLE, UNEXPECTED, INVALIDATED, ANSWER_DISAGREEMENT, ERROR_DISAGREEMENT)
CONTAINED_FORMS = ("original", "direction")
EXACT_FORMS = ("condition", "enumerated")
EXACT_MODES = ("paper", "words")
NOT_APPLICABLE = "not applicable"
UNK = "<unk>"
THRESHOLD = 0.8
GATE_TYPES = ("presence", "counting")
# levels.csv's columns (after the stage's dataset and style)
LEVEL_COLUMNS = [
    "model",
    "level",
    "concepts",
    "concept",
    "type",
    "subgroup",
    "form",
    "n",
    "correct",
    "accuracy",
    "passed",
]

_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
    )
}
_WORD = re.compile(r"[a-z0-9<>]+(?:[-'][a-z0-9]+)*")
# json.dumps(..., sort_keys=True) without building an encoder per call
_CANONICAL = json.JSONEncoder(sort_keys=True)


@lru_cache(maxsize=1)
def synonyms() -> dict[str, tuple[str, ...]]:
    """Canonical answer -> the words the generator uses for it (itself first): the region names
    and colour words of the generator's expression dictionary (``lib/families/scrapbook/data/expressions.yaml``)."""
    e = yaml.safe_load((DATA / "expressions.yaml").read_text())
    out = {UNK: (NOT_APPLICABLE, UNK), NOT_APPLICABLE: (NOT_APPLICABLE, UNK)}
    for table in (e["regions"], e.get("color_words", {})):
        for canonical, words in table.items():
            out[canonical] = tuple(dict.fromkeys([canonical, *words]))
    return out


def normalize(text: str, counting: bool = False) -> str:
    """Lower case, punctuation dropped, spaces collapsed; number words as digits for counting."""
    words = _WORD.findall(str(text).lower())
    if counting:
        words = [_NUMBER_WORDS.get(w, w) for w in words]
    return " ".join(words)


@lru_cache(maxsize=4096)
def _pattern(answer: str) -> re.Pattern:
    return re.compile(rf"(?<![a-z0-9]){re.escape(answer)}(?![a-z0-9])")


@lru_cache(maxsize=1024)
def _surfaces(space: tuple[str, ...], counting: bool) -> tuple[tuple[str, str], ...]:
    """(normalised surface word, canonical answer) for every answer of ``space`` and its synonyms."""
    syn = synonyms()
    return tuple(
        (normalize(w, counting), a)
        for a in space
        for w in syn.get(a, (a,))
        if normalize(w, counting)
    )


def plausible_answers(output: str, space: tuple[str, ...], counting: bool) -> set[str]:
    """The answers of ``space`` named in ``output``, by any of their synonyms; a match inside a
    longer match does not count ("center left" hides "center" and "left"). For counting questions
    every number is a plausible answer."""
    text = normalize(output, counting)
    spans = [
        (m.start(), m.end(), a)
        for w, a in _surfaces(space, counting)
        for m in _pattern(w).finditer(text)
    ]
    if counting:
        spans += [
            (m.start(), m.end(), m.group())
            for m in re.finditer(r"(?<![a-z0-9])\d+(?![a-z0-9])", text)
        ]
    if UNK in text:
        spans.append((text.index(UNK), text.index(UNK) + len(UNK), NOT_APPLICABLE))
    return {
        a
        for s, e, a in spans
        if not any(s2 <= s and e <= e2 and (e2 - s2) > (e - s) for s2, e2, _ in spans)
    }


def _exact(text: str, mode: str, counting: bool) -> str:
    return str(text).strip().lower() if mode == "paper" else normalize(text, counting)


def matches_exactly(
    output: str, expected: str, form: str, counting: bool = False, exact: str = "paper"
) -> bool:
    """Does the raw ``output`` equal the expected answer (the enumerated form: the listed word;
    the condition form: the word or one of its synonyms)?"""
    words = (
        synonyms().get(expected, (expected,))
        if form == "condition" or expected in (UNK, NOT_APPLICABLE)
        else (expected,)
    )
    got = _exact(output, exact, counting)
    return any(got == _exact(w, exact, counting) for w in words)


def read_answer(
    output: str | None,
    expected: str,
    form: str,
    space,
    counting: bool = False,
    exact: str = "paper",
) -> tuple[str, str | None]:
    """``(category, answer)`` of one answer: ``correct`` or an individual error category, and the
    one plausible answer it names (None when it names none or several)."""
    if exact not in EXACT_MODES:
        raise ValueError(f"exact={exact!r}: choose one of {EXACT_MODES}")
    if output is None:
        return UNEXPECTED, None
    canonical = NOT_APPLICABLE if expected in (UNK, NOT_APPLICABLE) else expected
    space = tuple(dict.fromkeys([*space, NOT_APPLICABLE]))
    found = plausible_answers(output, space, counting)
    if counting:
        canonical = normalize(canonical, counting)
    answer = next(iter(found)) if len(found) == 1 else None
    if form in EXACT_FORMS:
        if matches_exactly(output, expected, form, counting, exact):
            return CORRECT, canonical
        if len(found) > 1:
            return MULTIPLE, None
        return (
            (WRONG, answer) if answer is not None and answer != canonical else (UNEXPECTED, answer)
        )
    if form not in CONTAINED_FORMS:
        raise ValueError(
            f"unknown Scrapbook question form {form!r}; expected one of {CONTAINED_FORMS + EXACT_FORMS}"
        )
    if len(found) > 1:
        return MULTIPLE, None
    if answer == canonical:
        return CORRECT, answer
    return (WRONG, answer) if answer is not None else (UNEXPECTED, None)


def categorize(
    output: str | None,
    expected: str,
    form: str,
    space,
    counting: bool = False,
    exact: str = "paper",
) -> str:
    """One answer's category: ``correct`` or one of the individual error categories."""
    return read_answer(output, expected, form, space, counting, exact)[0]


def overall_rows(model: str, filt: str, n: int, correct: int, correct_strict: int) -> list[dict]:
    """Table 8's two rows of one model and filter: ``n`` questions, ``correct`` of them right in
    all versions, ``correct_strict`` also with precedence (``*``)."""
    return [
        {
            "model": model,
            "filter": filt + star,
            "questions": n,
            "correct": k,
            "accuracy": k / n if n else np.nan,
        }
        for star, k in (("", correct), ("*", correct_strict))
    ]


def error_rows(model: str, filt: str, unit: str, counts) -> list[dict]:
    """Tables 9, 10 and 15's rows of one model, filter (non-absurd / all) and unit
    (``individual`` answers or ``aggregated`` questions), from the count of each category
    (``counts``: category -> count, a mapping or a value_counts Series): each category's count
    and share of the errors, then their ``total`` (for questions: questions - Corrects*, of which
    ``invalidated`` = Corrects - Corrects*, as in the paper)."""
    rows = []
    total = int(sum(counts.get(c, 0) for c in CATEGORIES))
    for c in CATEGORIES:
        if unit == "individual" and c in (ANSWER_DISAGREEMENT, ERROR_DISAGREEMENT):
            continue
        k = int(counts.get(c, 0))
        rows.append(
            {
                "model": model,
                "filter": filt,
                "unit": unit,
                "category": c,
                "count": k,
                "share": k / total if total else 0.0,
            }
        )
    rows.append(
        {
            "model": model,
            "filter": filt,
            "unit": unit,
            "category": "total",
            "count": total,
            "share": 1.0 if total else 0.0,
        }
    )
    return rows


def errors_frame(errors: pd.DataFrame, overall: pd.DataFrame) -> pd.DataFrame:
    """errors.csv's rows of a group: the rows of :func:`error_rows`, then those of
    :func:`overall_rows` as unit ``questions``, category ``overall``."""
    return pd.concat(
        [
            errors,
            overall.rename(columns={"questions": "count"}).assign(
                unit="questions", category="overall"
            ),
        ],
        ignore_index=True,
    )


def concept_name(concept: str) -> str:
    """The concept itself, whatever role it plays: ``reference_shape:square`` is ``shape:square``."""
    return concept.removeprefix("reference_")


def level_row(model, level, keys, k, n, now_passed) -> dict:
    """levels.csv's row of one model and level: ``keys`` = (concepts, concept, type, subgroup,
    form), ``k`` of ``n`` right, and whether the row's concept is in ``now_passed``."""
    concepts, concept, typ, subgroup, form = keys
    return {
        "model": model,
        "level": int(level),
        "concepts": concepts,
        "concept": concept,
        "type": typ,
        "subgroup": int(subgroup),
        "form": form,
        "n": n,
        "correct": k,
        "accuracy": k / n if n else np.nan,
        "passed": concept in now_passed,
    }


def query_id(query: dict) -> str:
    """A query as one comparable string (its canonical JSON, keys sorted at every level): the
    protocol's question identity, and the key the Scrapbook generator's caches and de-duplication
    use for the same query (``json.loads`` gives the query back)."""
    return _CANONICAL.encode(query)
