"""The Scrapbook evaluation protocol (paper sections 7-8), rule by rule.

Every answer row needs: ``model, item_id, image, parent, query`` (canonical JSON of the query),
``paraphrase`` (which paraphrase of the query; default 0), ``type, form, level, concepts,
subgroup, absurd, expected`` (the answer text), ``output`` (the model's raw text, or None for a
failed call) and ``space`` (the question's answer vocabulary: the enumerated alternatives).

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
in every form pooled (:func:`queries`), consistent when right at least ``THRESHOLD`` (0.8) of the
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
LEVEL_COLUMNS = "model level concepts concept type subgroup form n correct accuracy passed".split()

_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
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


def _ancestors(image, parent: dict):
    seen = set()
    p = parent.get(image)
    while p is not None and not _isna(p) and p not in seen:
        seen.add(p)
        yield p
        p = parent.get(p)


def score_versions(df: pd.DataFrame, exact: str = "paper") -> pd.DataFrame:
    """Per answer: ``category``, ``answer`` (the plausible answer read), ``correct`` and, with the
    precedence check per (query, form), ``category_strict`` / ``correct_strict``. Each distinct
    (output, expected, form, space, type) is read once: a dataset's answers repeat."""
    df = df.copy()
    if "paraphrase" not in df:
        df["paraphrase"] = 0
    memo: dict = {}
    read = []
    for key in zip(df["output"], df["expected"], df["form"], map(tuple, df["space"]), df["type"]):
        got = memo.get(key)
        if got is None:
            o, e, f, sp, t = key
            got = memo[key] = read_answer(o, e, f, sp, t == "counting", exact)
        read.append(got)
    df["category"] = [c for c, _ in read]
    df["answer"] = [a for _, a in read]
    df["correct"] = df["category"] == CORRECT
    return with_precedence(df)


def with_precedence(df: pd.DataFrame) -> pd.DataFrame:
    """Answers read (``category``, ``correct``) given the precedence check per (query, form):
    ``category_strict`` / ``correct_strict`` added in place (``df`` returned). A streamed rescore
    reads its answers chunk by chunk and calls this once on the group's compact frame."""
    keys = ["model", "image", "query", "form"]
    invalid = df["correct"].to_numpy() & _failed_on_ancestor(
        df, df.groupby(keys, sort=False)["correct"].all(), keys
    )
    df["category_strict"] = np.where(invalid, INVALIDATED, df["category"])
    df["correct_strict"] = df["category_strict"] == CORRECT
    return df


def _failed_on_ancestor(frame: pd.DataFrame, ok: pd.Series, keys: list[str]) -> np.ndarray:
    """Per row of ``frame``: is ``ok`` False for the row's ``keys`` with its image replaced by one
    of the image's ancestors? (``ok`` is indexed by ``keys``; a key it lacks is not a failure.)
    Joins instead of a Python loop per row: a full Scrapbook dataset has hundreds of thousands of answers."""
    parent = dict(zip(frame["image"], frame["parent"]))
    pairs = pd.DataFrame(
        [(i, a) for i in parent for a in _ancestors(i, parent)], columns=["image", "ancestor"]
    )
    failed = ok[~ok.astype(bool)].reset_index()[keys]
    if pairs.empty or failed.empty:
        return np.zeros(len(frame), dtype=bool)
    failed = (
        failed.rename(columns={"image": "ancestor"})
        .merge(pairs, on="ancestor")[keys]
        .drop_duplicates()
    )
    return (
        frame[keys]
        .merge(failed.assign(_failed=True), on=keys, how="left")["_failed"]
        .notna()
        .to_numpy()
    )


def _isna(x) -> bool:
    return x is None or (isinstance(x, float) and np.isnan(x))


def aggregate_category(categories, answers=None) -> str:
    """A question's category from its versions' categories and the plausible answers they read."""
    cats = list(categories)
    kinds = set(cats)
    answers = list(answers) if answers is not None else [None] * len(cats)
    if kinds == {CORRECT}:
        return CORRECT
    if kinds <= {CORRECT, WRONG}:
        return WRONG if kinds == {WRONG} and len(set(answers)) == 1 else ANSWER_DISAGREEMENT
    if len(kinds) == 1:
        return kinds.pop()
    return ERROR_DISAGREEMENT


def queries(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per query on an image (model, image, query), in order of first appearance: its
    share of answers right over every paraphrase in every form (``consistency``) and whether that
    is at least ``THRESHOLD`` (``consistent``, which ``consistent_rate`` averages). Section 7: "the
    model should provide an accurate response at least 80% of the time for the same question posed
    in different forms", over "multiple iterations of the same question" (its paraphrases). Over
    one paraphrase's four forms 0.8 needs all four (the all-versions accuracy); over two, 7 of 8."""
    g = scored.groupby(["model", "image", "query"], sort=False)
    out = g.agg(absurd=("absurd", "first"), consistency=("correct", "mean")).reset_index()
    return out.assign(consistent=out["consistency"] >= THRESHOLD)


def questions(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per question (model, image, query, paraphrase): all-versions correctness, the share
    of its versions right, aggregated category (:func:`aggregate_category`'s rule, in one pass),
    and the precedence check (``*_strict``)."""
    scored = scored if "paraphrase" in scored else scored.assign(paraphrase=0)
    keys = ["model", "image", "query", "paraphrase"]
    cat = scored["category"]
    g = scored.assign(
        _correct=cat == CORRECT,
        _wrong=cat == WRONG,
        _answer=scored["answer"] if "answer" in scored else None,
    ).groupby(keys, sort=False)
    out = g.agg(
        type=("type", "first"),
        level=("level", "first"),
        subgroup=("subgroup", "first"),
        absurd=("absurd", "first"),
        concepts=("concepts", "first"),
        parent=("parent", "first"),
        versions=("correct", "size"),
        consistency=("correct", "mean"),
        correct_all=("correct", "all"),
        _correct=("_correct", "sum"),
        _wrong=("_wrong", "sum"),
        _kinds=("category", "nunique"),
        _first=("category", "first"),
    ).reset_index()
    out["_answers"] = g["_answer"].nunique(dropna=False).to_numpy()
    n, right, wrong = out["versions"], out["_correct"], out["_wrong"]
    out["category"] = np.select(
        [right == n, (wrong == n) & (out["_answers"] == 1), right + wrong == n, out["_kinds"] == 1],
        [CORRECT, WRONG, ANSWER_DISAGREEMENT, out["_first"]],
        ERROR_DISAGREEMENT,
    )
    query = ["model", "image", "query"]
    invalid = out["correct_all"].to_numpy() & _failed_on_ancestor(
        out, out.groupby(query, sort=False)["correct_all"].all(), query
    )
    out["correct_all_strict"] = out["correct_all"] & ~invalid
    out["category_strict"] = np.where(invalid, INVALIDATED, out["category"])
    return out.drop(columns=["parent", "_correct", "_wrong", "_kinds", "_first", "_answers"])


def overall_table(scored: pd.DataFrame, qs: pd.DataFrame) -> pd.DataFrame:
    """Table 8: questions, all-versions correct and % per model and filter (``*`` = with precedence)."""
    rows = []
    for model, q in qs.groupby("model"):
        for filt, sub in (("non-absurd", q[~q["absurd"]]), ("full", q)):
            rows.extend(
                overall_rows(
                    model,
                    filt,
                    len(sub),
                    int(sub["correct_all"].sum()),
                    int(sub["correct_all_strict"].sum()),
                )
            )
    return pd.DataFrame(rows)


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


def error_table(scored: pd.DataFrame, qs: pd.DataFrame) -> pd.DataFrame:
    """Tables 9, 10, 15: error counts per model, filter (non-absurd / all) and unit (``individual``
    answers or ``aggregated`` questions), with each category's share of the errors. For questions,
    ``total`` = questions - Corrects* and ``invalidated`` = Corrects - Corrects*, as in the paper."""
    rows = []
    for unit, frame in (("individual", scored), ("aggregated", qs)):
        for model, m in frame[["model", "absurd", "category_strict"]].groupby(
            "model"
        ):  # the columns it counts
            for filt, sub in (("non-absurd", m[~m["absurd"].astype(bool)]), ("all", m)):
                rows.extend(error_rows(model, filt, unit, sub["category_strict"].value_counts()))
    return pd.DataFrame(rows)


def error_rows(model: str, filt: str, unit: str, counts) -> list[dict]:
    """:func:`error_table`'s rows of one model, filter and unit from the count of each category
    (``counts``: category -> count, a mapping or a value_counts Series)."""
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
    """errors.csv's rows of a group: :func:`error_table`'s, then :func:`overall_table`'s as unit
    ``questions``, category ``overall``."""
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


def _passes(q: pd.DataFrame, types, threshold: float) -> bool:
    """Enabled (present and absent questions of every gating type) and every (type, subgroup) at
    or above the threshold, all versions correct."""
    for t in types:
        sub = q[q["type"] == t]
        subgroups = set(sub["subgroup"])
        if 1 not in subgroups or not any(s >= 2 for s in subgroups):
            return False
        if (sub.groupby("subgroup")["correct"].mean() < threshold).any():
            return False
    return True


def levels(
    scored: pd.DataFrame, threshold: float = THRESHOLD, gate_types=GATE_TYPES
) -> pd.DataFrame:
    """Level gating and the per-level tables (Figures 17-31, Tables 5-6 and 11-14) for presence and counting.

    Rows: model, level, concepts (the question's concepts), concept (the concepts new at this
    level, or all of them when none is new), type, subgroup, form (or ``all`` = every version
    correct), n, correct, accuracy, passed (that concept passed at this level). From level 2 on only
    questions whose earlier concepts passed appear.
    """
    # the columns the gating reads; each concept list renamed once, its name shared by its answers
    keep = ["model", "level", "concepts", "image", "query", "type", "subgroup", "form", "correct"]
    pc = scored.loc[
        scored["type"].isin(gate_types) & ~scored["absurd"].astype(bool),
        keep + (["paraphrase"] if "paraphrase" in scored else []),
    ].copy()
    if "paraphrase" not in pc:
        pc["paraphrase"] = 0
    names = {cs: tuple(dict.fromkeys(concept_name(c) for c in cs)) for cs in set(pc["concepts"])}
    keys = {cs: "|".join(cs) for cs in names.values()}
    pc["concepts"] = pd.Series([names[cs] for cs in pc["concepts"]], index=pc.index, dtype=object)
    pc["concepts_key"] = pd.Series(
        [keys[cs] for cs in pc["concepts"]], index=pc.index, dtype=object
    )
    types = [t for t in gate_types if t in set(pc["type"])]
    rows = []
    for model, m in pc.groupby("model"):
        passed: set[str] = set()
        seen: set[str] = set()  # concepts asked about at lower levels
        for level in sorted(m["level"].unique()):
            lv = m[m["level"] == level]
            gated = lv[lv["concepts"].map(lambda cs: all(c in passed for c in cs if c in seen))]
            new = {
                cs: "|".join([c for c in cs if c not in seen] or cs)
                for cs in set(gated["concepts"])
            }
            gated = gated.assign(
                concept=pd.Series(
                    [new[cs] for cs in gated["concepts"]], index=gated.index, dtype=object
                )
            )
            q = (
                gated.groupby(["image", "query", "paraphrase"])
                .agg(
                    correct=("correct", "all"),
                    type=("type", "first"),
                    subgroup=("subgroup", "first"),
                    concept=("concept", "first"),
                    concepts_key=("concepts_key", "first"),
                )
                .reset_index()
            )
            now_passed = {c for c, sub in q.groupby("concept") if _passes(sub, types, threshold)}
            for keys, sub in gated.groupby(["concepts_key", "concept", "type", "subgroup", "form"]):
                rows.append(
                    _level_row(model, level, keys, int(sub["correct"].sum()), len(sub), now_passed)
                )
            for keys, sub in q.groupby(["concepts_key", "concept", "type", "subgroup"]):
                rows.append(
                    _level_row(
                        model,
                        level,
                        (*keys, "all"),
                        int(sub["correct"].sum()),
                        len(sub),
                        now_passed,
                    )
                )
            seen.update(c for cs in lv["concepts"] for c in cs)
            passed |= {part for c in now_passed for part in c.split("|")}
    return pd.DataFrame(rows, columns=LEVEL_COLUMNS)


def _level_row(model, level, keys, k, n, now_passed) -> dict:
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
