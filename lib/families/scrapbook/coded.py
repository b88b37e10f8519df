"""The Scrapbook protocol's group rules (:mod:`lib.families.scrapbook.consistency` states them) on
a group's answers held as numpy arrays of integer codes: precedence over ancestor images,
questions and their aggregated categories, consistency, level gating, the metric rows and the
error tables.

Scrapbook's scorer (:class:`lib.families.scrapbook.task.ScrapbookScorer`, which stage 06 streams
and :class:`~lib.families.scrapbook.task.ScrapbookQA` runs on a group in memory) keeps each answer
as a few small codes (:class:`~lib.families.scrapbook.task.Codes`) and hands them here
(:class:`CodedAnswers`). A pandas frame of every answer, with its joins and group-bys, costs
hundreds of megabytes on a paper-sized group (hundreds of thousands of answers); here the rules
run as sorts and counts over integer arrays (a few bytes per answer), and only the tables (rows
per concept, category, form) are built as frames, by
:mod:`~lib.families.scrapbook.consistency`'s row functions. The tests hold every answer's scores
and every table equal to a second reading of the rules on pandas frames
(tests/scrapbook/reference_consistency.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lib.families.scrapbook import consistency
from lib.families.scrapbook.tables import ERRORS, LEVELS
from lib.tasks.scoring import Scoring, Tables, metric_row

# a category as a code: its index here (the individual categories, then the aggregated ones)
CATEGORY_NAMES = (consistency.CORRECT, *consistency.CATEGORIES)
CORRECT, WRONG, INVALIDATED = (
    CATEGORY_NAMES.index(c)
    for c in (consistency.CORRECT, consistency.WRONG, consistency.INVALIDATED)
)
ANSWER_DISAGREEMENT, ERROR_DISAGREEMENT = (
    CATEGORY_NAMES.index(c)
    for c in (consistency.ANSWER_DISAGREEMENT, consistency.ERROR_DISAGREEMENT)
)
# an answer's parent code: none; an image none of the group's answers is about
NO_PARENT, UNEVALUATED = -2, -1


@dataclass
class CodedAnswers:
    """A group's scored answers (one model and style), each array one element per answer in the
    group's order. ``image``, ``query``, ``paraphrase``, ``type``, ``form``, ``concepts`` and
    ``answer`` are codes (equal code, equal value; ``types``, ``forms`` and ``concept_values`` name
    them); ``parent`` is the code of the parent's image, :data:`UNEVALUATED` for a parent no
    answer is about, :data:`NO_PARENT` for none; ``category`` indexes :data:`CATEGORY_NAMES`;
    ``level`` and ``subgroup`` are the numbers."""

    model: str
    image: np.ndarray
    parent: np.ndarray
    query: np.ndarray
    paraphrase: np.ndarray
    type: np.ndarray
    types: list
    form: np.ndarray
    forms: list
    level: np.ndarray
    subgroup: np.ndarray
    concepts: np.ndarray
    concept_values: list
    absurd: np.ndarray
    category: np.ndarray
    answer: np.ndarray
    valid: np.ndarray
    truncated: np.ndarray
    # each answer's image chain (Task.cluster), which intervals resample
    cluster: np.ndarray | None = None

    @property
    def correct(self) -> np.ndarray:
        return self.category == CORRECT


# rows whose ancestors are walked at a time: the walk's arrays stay small at any group size
BLOCK = 2**16


def combined(*keys: np.ndarray) -> np.ndarray:
    """One int64 code per row for its ``keys`` (arrays of non-negative integers, one length):
    equal codes, equal keys. Mixed radix, the columns so far numbered densely first where the
    next would overflow."""
    key = np.zeros(len(keys[0]), dtype=np.int64)
    for col in keys:
        size = int(col.max()) + 1 if len(col) else 1
        if len(key) and int(key.max()) >= 2**62 // size:
            key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
        key *= size
        key += col
    return key


def groups(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by equal ``keys`` (:func:`combined`): each row's group number - groups
    numbered in the order they first appear, as pandas' ``groupby(..., sort=False)`` orders them -
    and each group's first row. Where each group's rows stand together (a question's versions
    are written one after another) the runs are the groups, found without a sort."""
    key, n = combined(*keys), len(keys[0])
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    change = np.empty(n, dtype=bool)
    change[0] = True
    np.not_equal(key[1:], key[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    if len(np.unique(key[starts])) == len(starts):  # every key in one run
        return np.cumsum(change, dtype=np.int64) - 1, starts
    del change, starts
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    del key
    by_appearance = np.argsort(first, kind="stable")
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_appearance] = np.arange(len(first))
    return rank[inverse.reshape(-1)], first[by_appearance]


def _count(group: np.ndarray, n_groups: int, where: np.ndarray | None = None) -> np.ndarray:
    """Rows per group (of those ``where`` is true)."""
    return np.bincount(group if where is None else group[where], minlength=n_groups)


def _distinct(group: np.ndarray, codes: np.ndarray, n_groups: int, rows: np.ndarray) -> np.ndarray:
    """How many distinct ``codes`` each group's ``rows`` (a row mask) hold (0 for the groups of no such row)."""
    size = int(codes.max()) + 1 if len(codes) else 1
    pairs = np.unique(group[rows] * size + codes[rows])
    return np.bincount(pairs // size, minlength=n_groups)


def _image_parents(image: np.ndarray, parent: np.ndarray, n_images: int) -> np.ndarray:
    """Each image's parent as a dict of (image, parent) pairs keeps it: the last row's, as an
    image code or -1 (none, or an image no answer is about: its own parent is unknown)."""
    out = np.full(n_images, -1, dtype=np.int64)
    _, last = np.unique(image[::-1], return_index=True)
    last = len(image) - 1 - last
    out[image[last]] = np.maximum(parent[last], -1)
    return out


def _on_failed_ancestor(
    image: np.ndarray, other: np.ndarray, ok: np.ndarray, parents: np.ndarray
) -> np.ndarray:
    """Per row: does an ancestor ``a`` of the row's image (``parents``: :func:`_image_parents`)
    hold a unit (``a``, the row's ``other`` code) with a row not ``ok``? The protocol's precedence
    check, ancestor by ancestor for :data:`BLOCK` rows at a time instead of a join of every pair."""
    size = int(other.max()) + 1 if len(other) else 1
    bad = np.flatnonzero(~ok)
    failed = np.unique(
        np.concatenate(
            [
                np.unique(image[at].astype(np.int64) * size + other[at])
                for at in np.array_split(bad, len(bad) // BLOCK + 1)
            ]
        )
    )
    out = np.zeros(len(image), dtype=bool)
    if not len(failed):
        return out
    for start in range(0, len(image), BLOCK):
        rows = slice(start, start + BLOCK)
        ancestor, own = parents[image[rows]], other[rows].astype(np.int64)
        for _ in range(
            len(parents)
        ):  # a chain is at most every image long (a cycle only repeats it)
            has = ancestor >= 0
            if not has.any():
                break
            unit = ancestor * size + own
            at = np.minimum(np.searchsorted(failed, unit), len(failed) - 1)
            out[rows] |= has & (failed[at] == unit)
            ancestor = np.where(has, parents[np.maximum(ancestor, 0)], -1)
    return out


def strict_categories(a: CodedAnswers) -> np.ndarray:
    """Each answer's ``category_strict``: correct answers to a query (in a form) answered wrong on
    an ancestor image are invalidated."""
    correct = a.correct
    parents = _image_parents(a.image, a.parent, int(a.image.max()) + 1 if len(a.image) else 0)
    invalid = correct & _on_failed_ancestor(a.image, combined(a.query, a.form), correct, parents)
    return np.where(invalid, INVALIDATED, a.category).astype(np.int8)


def questions(a: CodedAnswers) -> dict[str, np.ndarray]:
    """One entry per question (image, query, paraphrase), in the order questions first appear:
    ``absurd``, ``correct_all``, ``category``, ``correct_all_strict`` and ``category_strict``.
    A question's category: every version correct, correct; every version wrong with the same
    plausible answer, wrong; every version correct or wrong otherwise, answer disagreement; one
    other category throughout, that category; else error disagreement."""
    q, first = groups(a.image, a.query, a.paraphrase)
    n_q = len(first)
    versions, right = _count(q, n_q), _count(q, n_q, a.category == CORRECT)
    wrong = _count(q, n_q, a.category == WRONG)
    correct_all = right == versions
    # the distinct answers (categories) are counted only where the rule reads them
    all_wrong, other_kinds = wrong == versions, right + wrong < versions
    category = np.select(
        [
            right == versions,
            all_wrong & (_distinct(q, a.answer, n_q, all_wrong[q]) == 1),
            right + wrong == versions,
            other_kinds & (_distinct(q, a.category, n_q, other_kinds[q]) == 1),
        ],
        [CORRECT, WRONG, ANSWER_DISAGREEMENT, a.category[first]],
        ERROR_DISAGREEMENT,
    )
    # a question's parent: its first answer's that names one (as pandas' "first" skips None)
    parent = np.full(n_q, NO_PARENT, dtype=np.int64)
    named = np.flatnonzero(a.parent != NO_PARENT)
    with_parent, at = np.unique(q[named], return_index=True)
    parent[with_parent] = a.parent[named[at]]
    image = a.image[first]
    parents = _image_parents(image, parent, int(a.image.max()) + 1 if len(a.image) else 0)
    invalid = correct_all & _on_failed_ancestor(image, a.query[first], correct_all, parents)
    return {
        "cluster": None if a.cluster is None else a.cluster[first],
        "absurd": a.absurd[first],
        "correct_all": correct_all,
        "category": category,
        "correct_all_strict": correct_all & ~invalid,
        "category_strict": np.where(invalid, INVALIDATED, category),
    }


def queries(a: CodedAnswers) -> dict[str, np.ndarray]:
    """One entry per query on an image, every paraphrase in every form pooled, in order of first
    appearance: ``cluster``, ``absurd`` and ``consistent`` (right at least
    :data:`~lib.families.scrapbook.consistency.THRESHOLD` of the time)."""
    q, first = groups(a.image, a.query)
    right = _count(q, len(first), a.category == CORRECT) / _count(q, len(first))
    cluster = None if a.cluster is None else a.cluster[first]
    return {
        "cluster": cluster,
        "absurd": a.absurd[first],
        "consistent": right >= consistency.THRESHOLD,
    }


def _category_counts(codes: np.ndarray) -> dict[str, int]:
    return dict(zip(CATEGORY_NAMES, np.bincount(codes, minlength=len(CATEGORY_NAMES)).tolist()))


def errors(a: CodedAnswers, strict: np.ndarray, qs: dict) -> pd.DataFrame:
    """errors.csv's rows of the group (Tables 8, 9, 10 and 15): the error counts of answers and
    questions (:func:`lib.families.scrapbook.consistency.error_rows`), non-absurd and all, then
    the questions right in all versions
    (:func:`~lib.families.scrapbook.consistency.overall_rows`)."""
    rows = []
    for unit, absurd, category in (
        ("individual", a.absurd, strict),
        ("aggregated", qs["absurd"], qs["category_strict"]),
    ):
        for filt, keep in (("non-absurd", ~absurd), ("all", np.ones(len(absurd), dtype=bool))):
            rows.extend(
                consistency.error_rows(a.model, filt, unit, _category_counts(category[keep]))
            )
    overall = []
    for filt, keep in (
        ("non-absurd", ~qs["absurd"]),
        ("full", np.ones(len(qs["absurd"]), dtype=bool)),
    ):
        overall.extend(
            consistency.overall_rows(
                a.model,
                filt,
                int(keep.sum()),
                int(qs["correct_all"][keep].sum()),
                int(qs["correct_all_strict"][keep].sum()),
            )
        )
    return consistency.errors_frame(pd.DataFrame(rows), pd.DataFrame(overall))


def tables(a: CodedAnswers, scoring: Scoring) -> tuple[Tables, np.ndarray]:
    """The group's metric rows (each form's accuracy over answers; over non-absurd and all
    questions the all-versions accuracy, without and with precedence, and over queries
    ``consistent_rate``, every value a 0/1 array the bootstrap resamples by image chain), its
    levels and errors, and which answers the precedence check changed (correct on their own, not
    ``correct_strict``: a flag per answer)."""
    valid, truncated = a.valid, a.truncated
    n_inv, n_cut = int((~valid).sum()), int(truncated.sum())
    correct = a.correct
    rows = []
    for name in sorted(a.forms):
        at = np.flatnonzero(a.form == a.forms.index(name))
        rows.append(
            metric_row(
                f"form={name}",
                "accuracy",
                correct[at].astype(float),
                len(at),
                int((~valid[at]).sum()),
                scoring=scoring,
                n_truncated=int(truncated[at].sum()),
                clusters=None if a.cluster is None else a.cluster[at],
            )
        )
    qs, qy = questions(a), queries(a)
    for filt in ("non-absurd", "full"):
        for metric, units, col in (
            ("accuracy_all_forms", qs, "correct_all"),
            ("accuracy_all_forms_strict", qs, "correct_all_strict"),
            ("consistent_rate", qy, "consistent"),
        ):
            keep = ~units["absurd"] if filt == "non-absurd" else np.ones(len(units["absurd"]), bool)
            rows.append(
                metric_row(
                    filt,
                    metric,
                    units[col][keep].astype(float),
                    int(keep.sum()),
                    n_inv,
                    scoring=scoring,
                    n_truncated=n_cut,
                    clusters=None if units["cluster"] is None else units["cluster"][keep],
                )
            )
    strict = strict_categories(a)
    fixed = correct & (strict != CORRECT)
    table = errors(a, strict, qs)
    del qs, strict
    return Tables(rows, {LEVELS: levels(a), ERRORS: table}), fixed


def _names(a: CodedAnswers) -> tuple[list[tuple], np.ndarray, list[str]]:
    """Each concepts code's concept names (a reference object's concept is the concept itself),
    its key's number and the keys ("|"-joined names: codes with the same names share one)."""
    names = [
        tuple(dict.fromkeys(consistency.concept_name(c) for c in cs)) for cs in a.concept_values
    ]
    number: dict[str, int] = {}
    key = np.array([number.setdefault("|".join(cs), len(number)) for cs in names], dtype=np.int64)
    return names, key, list(number)


def _passes(
    in_concept: np.ndarray,
    q_type: np.ndarray,
    q_sub: np.ndarray,
    q_ok: np.ndarray,
    types: list[int],
    threshold: float,
) -> bool:
    """Does a concept pass (``in_concept``: a level's questions of it)? Enabled (present and
    absent questions of every gating type) and every (type, subgroup) right in all versions at
    least ``threshold`` of the time."""
    for t in types:
        sel = in_concept & (q_type == t)
        subgroups = np.unique(q_sub[sel])
        if 1 not in subgroups or not (subgroups >= 2).any():
            return False
        if any(q_ok[sel & (q_sub == s)].mean() < threshold for s in subgroups):
            return False
    return True


def _gated(
    a: CodedAnswers, names: list, lv: np.ndarray, seen: set, passed: set
) -> tuple[np.ndarray, np.ndarray, list]:
    """A level's answers whose concepts asked at lower levels all passed there, each one's
    concept number (the concepts new at this level, else all of them) and the concepts' names."""
    allowed = np.zeros(len(names), dtype=bool)
    concept = np.full(len(names), -1, dtype=np.int64)
    number: dict[str, int] = {}
    for c in np.unique(a.concepts[lv]).tolist():
        cs = names[c]
        if all(x in passed for x in cs if x in seen):
            allowed[c] = True
            concept[c] = number.setdefault(
                "|".join([x for x in cs if x not in seen] or cs), len(number)
            )
    gated = lv[allowed[a.concepts[lv]]]
    return gated, concept[a.concepts[gated]], list(number)


def _questions_of(a: CodedAnswers, gated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The questions (image, query, paraphrase) of a level's ``gated`` answers: each one's first
    answer (a position in ``gated``) and whether every version of it is right."""
    if not len(gated):
        return gated, np.zeros(0, dtype=bool)
    q, first = groups(a.image[gated], a.query[gated], a.paraphrase[gated])
    return first, _count(q, len(first), a.correct[gated]) == _count(q, len(first))


def _sums(keys: tuple, ok: np.ndarray) -> list[tuple[int, int, int]]:
    """(first row, correct, n) per group of equal ``keys``."""
    if not len(ok):
        return []
    g, first = groups(*keys)
    n, k = _count(g, len(first)), _count(g, len(first), ok)
    return list(zip(first.tolist(), k.tolist(), n.tolist()))


def _level_rows(a: CodedAnswers, level, gated, labels: tuple, questions: tuple, now: set) -> list:
    """levels.csv's rows of one level, sorted by their labels: the ``gated`` answers right per
    concepts, concept, type, subgroup and form, then the questions right in all versions per
    concepts, concept, type and subgroup (form ``all``). ``labels``: the answers' concepts-key and
    concept codes, each with its names; ``questions``: :func:`_questions_of`."""
    (ckey, key_names), (concept, concept_names) = labels
    first, q_ok = questions
    t, s = a.type[gated], a.subgroup[gated]
    rows = []
    for pick, form, ok in (
        (lambda x: x, a.form[gated], a.correct[gated]),
        (lambda x: x[first], None, q_ok),
    ):
        ck, co, ty, sg = pick(ckey), pick(concept), pick(t), pick(s)
        keys = (ck, co, ty, np.unique(sg, return_inverse=True)[1].reshape(-1))
        found = sorted(
            (
                (
                    key_names[ck[i]],
                    concept_names[co[i]],
                    a.types[ty[i]],
                    int(sg[i]),
                    "all" if form is None else a.forms[form[i]],
                ),
                k,
                n,
            )
            for i, k, n in _sums(keys if form is None else (*keys, form), ok)
        )
        rows.extend(consistency.level_row(a.model, level, *row, now) for row in found)
    return rows


def levels(
    a: CodedAnswers, threshold: float = consistency.THRESHOLD, gate_types=consistency.GATE_TYPES
) -> pd.DataFrame:
    """Level gating and the per-level rows (Figures 17-31, Tables 5-6 and 11-14) of the group's
    presence and counting answers (non-absurd), by concepts, concept, type, subgroup and form
    (``all``: every version correct); from level 2 on only questions whose earlier concepts
    passed appear (:mod:`lib.families.scrapbook.consistency`'s rule)."""
    gate = np.isin(a.type, [k for k, t in enumerate(a.types) if t in gate_types]) & ~a.absurd
    rows_at = np.flatnonzero(gate)
    present = {a.types[k] for k in np.unique(a.type[rows_at]).tolist()}
    types = [a.types.index(t) for t in gate_types if t in present]
    names, key, key_names = _names(a)
    passed: set[str] = set()
    seen: set[str] = set()  # concepts asked about at lower levels
    rows = []
    for level in sorted(np.unique(a.level[rows_at]).tolist()):
        lv = rows_at[a.level[rows_at] == level]
        gated, concept, concept_names = _gated(a, names, lv, seen, passed)
        first, q_ok = _questions_of(a, gated)
        q_type, q_sub, q_concept = a.type[gated][first], a.subgroup[gated][first], concept[first]
        now = {
            concept_names[c]
            for c in np.unique(q_concept).tolist()
            if _passes(q_concept == c, q_type, q_sub, q_ok, types, threshold)
        }
        labels = (key[a.concepts[gated]], key_names), (concept, concept_names)
        rows += _level_rows(a, level, gated, labels, (first, q_ok), now)
        seen.update(x for c in np.unique(a.concepts[lv]).tolist() for x in names[c])
        passed |= {part for c in now for part in c.split("|")}
    return pd.DataFrame(rows, columns=consistency.LEVEL_COLUMNS)
