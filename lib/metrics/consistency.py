"""The Scrapbook evaluation protocol (paper sections 7-8).

Every prediction row needs: ``model, item_id, image, parent, query`` (canonical JSON of the query),
``type, form, level, concepts, subgroup, absurd, expected`` (the answer text), ``output`` (the
model's raw text, or None for a failed call) and ``space`` (the question's answer vocabulary: the
enumerated alternatives, ``not applicable`` included).

**Matching per form** - original and direction: the expected answer is contained in the output;
condition and enumerated: the output equals it exactly (case, outer punctuation and spaces
ignored; number words read as digits). An expected ``<unk>`` (presupposition failure) is matched by
"not applicable", the phrase the enumerated form offers.

**Error categories** (one per answer): ``wrong answer`` (exactly one plausible answer - one of the
space - and not the expected one), ``more than one answer`` (several plausible answers, e.g.
"yes and no"; also an error when the expected one is among them), ``unexpected answer`` (no
plausible answer at all; under the exact forms also the right answer buried in other text),
``invalidated by simpler image`` (correct, but the same question in the same form is wrong on an
ancestor image - the image with fewer objects it was built from).

**A question** is one query on one image; its *versions* are every paraphrase in every form.
Aggregated category: all versions agree -> that category; they disagree but every answer was
plausible (correct or wrong answer) -> ``answer disagreement``; else ``error disagreement``.
**Consistency** is the share of versions answered correctly; a question is consistent at >= 0.8.

**Level gating**: a concept passes a level when the level's presence questions containing it are
answered correctly in all versions at least ``threshold`` of the time; a question of the next level
is evaluated only when every concept it shares with lower levels passed there.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import numpy as np
import pandas as pd

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
NOT_APPLICABLE = "not applicable"
UNK = "<unk>"
THRESHOLD = 0.8

_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}
_WORD = re.compile(r"[a-z0-9<>]+(?:[-'][a-z0-9]+)*")


def normalize(text: str, counting: bool = False) -> str:
    """Lower case, punctuation dropped, spaces collapsed; number words as digits for counting."""
    words = _WORD.findall(str(text).lower())
    if counting:
        words = [_NUMBER_WORDS.get(w, w) for w in words]
    return " ".join(words)


@lru_cache(maxsize=4096)
def _pattern(answer: str) -> re.Pattern:
    return re.compile(rf"(?<![a-z0-9]){re.escape(answer)}(?![a-z0-9])")


def plausible_answers(output: str, space: tuple[str, ...], counting: bool) -> set[str]:
    """The answers of ``space`` named in ``output`` (longest match wins: "center left" hides
    "center"); for counting questions every number counts as a plausible answer."""
    text = normalize(output, counting)
    found = {a for a in space if _pattern(normalize(a, counting)).search(text)}
    if counting:
        found |= set(re.findall(r"(?<![a-z0-9])\d+(?![a-z0-9])", text))
    if UNK in text:
        found.add(NOT_APPLICABLE)
    return {a for a in found if not any(a != b and _pattern(a).search(b) for b in found)}


def categorize(output: str | None, expected: str, form: str, space, counting: bool = False) -> str:
    """One answer's category: ``correct`` or one of the individual error categories."""
    if output is None:
        return UNEXPECTED
    expected = NOT_APPLICABLE if expected == UNK else normalize(expected, counting)
    space = tuple(normalize(a, counting) for a in space) + (NOT_APPLICABLE,)
    found = plausible_answers(output, space, counting)
    if form in EXACT_FORMS:
        if normalize(output, counting) == expected or (expected == NOT_APPLICABLE and normalize(output) == UNK):
            return CORRECT
        if len(found) > 1:
            return MULTIPLE
        return WRONG if len(found) == 1 and expected not in found else UNEXPECTED
    if form not in CONTAINED_FORMS:
        raise ValueError(f"unknown Scrapbook question form {form!r}; expected one of {CONTAINED_FORMS + EXACT_FORMS}")
    if len(found) > 1:
        return MULTIPLE
    if found == {expected}:
        return CORRECT
    return WRONG if found else UNEXPECTED


def score_versions(df: pd.DataFrame) -> pd.DataFrame:
    """Per answer: ``category``/``correct`` and, with the precedence check, ``category_strict``/``correct_strict``."""
    df = df.copy()
    df["category"] = [categorize(o, e, f, tuple(s), t == "counting")
                      for o, e, f, s, t in zip(df["output"], df["expected"], df["form"], df["space"], df["type"])]
    df["correct"] = df["category"] == CORRECT
    # precedence: per (model, query, form), is every version correct on this image and all its ancestors?
    ok = df.groupby(["model", "image", "query", "form"])["correct"].all().to_dict()
    parent = dict(zip(df["image"], df["parent"]))
    chain_ok: dict = {}

    def ancestors_ok(model, image, query, form) -> bool:
        key = (model, image, query, form)
        if key not in chain_ok:
            p = parent.get(image)
            up = True if p is None or (model, p, query, form) not in ok else ancestors_ok(model, p, query, form)
            chain_ok[key] = up and ok.get(key, True)
        return chain_ok[key]

    invalid = [c and p is not None and not _isna(p) and (m, p, q, f) in ok and not ancestors_ok(m, p, q, f)
               for m, p, q, f, c in zip(df["model"], df["parent"], df["query"], df["form"], df["correct"])]
    df["category_strict"] = np.where(invalid, INVALIDATED, df["category"])
    df["correct_strict"] = df["category_strict"] == CORRECT
    return df


def _isna(x) -> bool:
    return x is None or (isinstance(x, float) and np.isnan(x))


def aggregate_category(categories) -> str:
    cats = set(categories)
    if len(cats) == 1:
        return cats.pop()
    return ANSWER_DISAGREEMENT if cats <= {CORRECT, WRONG} else ERROR_DISAGREEMENT


def questions(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, image, query): all-versions correctness, consistency, aggregated categories."""
    keys = ["model", "image", "query"]
    g = scored.groupby(keys, sort=False)
    out = g.agg(type=("type", "first"), level=("level", "first"), subgroup=("subgroup", "first"),
                absurd=("absurd", "first"), concepts=("concepts", "first"), versions=("correct", "size"),
                consistency=("correct", "mean"), correct_all=("correct", "all"),
                correct_all_strict=("correct_strict", "all")).reset_index()
    out["consistent"] = out["consistency"] >= THRESHOLD
    out["category"] = g["category"].agg(aggregate_category).to_numpy()
    out["category_strict"] = g["category_strict"].agg(aggregate_category).to_numpy()
    return out


def overall_table(scored: pd.DataFrame, qs: pd.DataFrame) -> pd.DataFrame:
    """Table 8: questions, all-versions correct and % per model and filter (``*`` = with precedence)."""
    rows = []
    for model, q in qs.groupby("model"):
        for filt, sub in (("non-absurd", q[~q["absurd"]]), ("full", q)):
            n = len(sub)
            for star, col in (("", "correct_all"), ("*", "correct_all_strict")):
                k = int(sub[col].sum())
                rows.append({"model": model, "filter": filt + star, "questions": n, "correct": k,
                             "accuracy": k / n if n else np.nan})
    return pd.DataFrame(rows)


def error_table(scored: pd.DataFrame, qs: pd.DataFrame) -> pd.DataFrame:
    """Tables 9, 10, 15: error counts per model, filter (non-absurd / all) and unit
    (``individual`` answers or ``aggregated`` questions), with each category's share of the errors."""
    rows = []
    for unit, frame in (("individual", scored), ("aggregated", qs)):
        for model, m in frame.groupby("model"):
            for filt, sub in (("non-absurd", m[~m["absurd"].astype(bool)]), ("all", m)):
                counts = sub["category_strict"].value_counts()
                total = int(sum(counts.get(c, 0) for c in CATEGORIES))
                for c in CATEGORIES:
                    if unit == "individual" and c in (ANSWER_DISAGREEMENT, ERROR_DISAGREEMENT):
                        continue
                    k = int(counts.get(c, 0))
                    rows.append({"model": model, "filter": filt, "unit": unit, "category": c, "count": k,
                                 "share": k / total if total else 0.0})
                rows.append({"model": model, "filter": filt, "unit": unit, "category": "total", "count": total,
                             "share": 1.0 if total else 0.0})
    return pd.DataFrame(rows)


def levels(scored: pd.DataFrame, threshold: float = THRESHOLD) -> pd.DataFrame:
    """Level gating and the per-level tables (Figures 17-31, Tables 11-14) for presence and counting.

    Rows: model, level, concepts (the question's concepts), concept (the concept new at this level,
    which the pass decision is about), type, subgroup, form (or ``all`` = every version correct),
    n, correct, accuracy, passed (the concept reached ``threshold`` on presence at this level).
    Only questions gated in (their earlier concepts passed) appear from level 2 on.
    """
    pc = scored[scored["type"].isin(("presence", "counting")) & ~scored["absurd"].astype(bool)].copy()
    pc["concepts_key"] = pc["concepts"].map(lambda c: "|".join(c))
    rows = []
    for model, m in pc.groupby("model"):
        passed: set[str] = set()
        seen: set[str] = set()  # concepts tested at lower levels
        for level in sorted(m["level"].unique()):
            lv = m[m["level"] == level]
            gated = lv[lv["concepts"].map(lambda cs: all(c in passed for c in cs if c in seen))]
            new = lambda cs: [c for c in cs if c not in seen] or list(cs)  # noqa: E731
            gated = gated.assign(concept=gated["concepts"].map(lambda cs: "|".join(new(cs))))
            q = gated.groupby(["image", "query"]).agg(correct=("correct", "all"), type=("type", "first"),
                                                       subgroup=("subgroup", "first"), concept=("concept", "first"),
                                                       concepts_key=("concepts_key", "first")).reset_index()
            # pass decision per new concept: presence questions, every version correct
            now_passed = set()
            for concept, sub in q[q["type"] == "presence"].groupby("concept"):
                if sub["correct"].mean() >= threshold:
                    now_passed.update(concept.split("|"))
            for keys, sub in gated.groupby(["concepts_key", "concept", "type", "subgroup", "form"]):
                rows.append(_level_row(model, level, keys, int(sub["correct"].sum()), len(sub), now_passed))
            for keys, sub in q.groupby(["concepts_key", "concept", "type", "subgroup"]):
                rows.append(_level_row(model, level, (*keys, "all"), int(sub["correct"].sum()), len(sub), now_passed))
            seen.update(c for cs in lv["concepts"] for c in cs)
            passed |= now_passed
    cols = ["model", "level", "concepts", "concept", "type", "subgroup", "form", "n", "correct", "accuracy", "passed"]
    return pd.DataFrame(rows, columns=cols)


def _level_row(model, level, keys, k, n, now_passed) -> dict:
    concepts, concept, typ, subgroup, form = keys
    return {"model": model, "level": int(level), "concepts": concepts, "concept": concept, "type": typ,
            "subgroup": int(subgroup), "form": form, "n": n, "correct": k, "accuracy": k / n if n else np.nan,
            "passed": all(c in now_passed for c in concept.split("|"))}


def query_id(query: dict) -> str:
    """A query as one comparable string (its canonical JSON): the protocol's question identity."""
    return json.dumps(query, sort_keys=True)
