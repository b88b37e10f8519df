"""The Scrapbook protocol's aggregate rules (:mod:`lib.families.scrapbook.consistency`) on a
group's answers held as numpy arrays of integer codes: precedence over ancestor images,
questions and their aggregated categories, level gating, the metric rows and the error tables.

Stage 06's streamed scorer (:class:`lib.families.scrapbook.task.ScrapbookScorer`) keeps each
answer as a few small codes (:class:`Codes`) and hands them here (:class:`CodedAnswers`). The
frame functions of :mod:`~lib.families.scrapbook.consistency` read the protocol rule by rule on a
pandas frame of every answer; on a paper-sized group (hundreds of thousands of answers) that frame
and its joins and group-bys cost hundreds of megabytes, growing with every answer. Here the same
rules run as sorts and counts over integer arrays (a few bytes per answer), and only the tables
(rows per concept, category, form) are built as frames, by the same row functions; the tests hold
both readings equal on every answer (tests/test_rescore_stream.py)."""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lib.families.scrapbook import consistency
from lib.families.scrapbook.tables import ERRORS, LEVELS
from lib.tasks.base import Scoring, Tables, metric_row

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
# a code array's next type code once its values outgrow it
WIDER = {"B": ("H", 2**16), "H": ("i", 2**31)}
CODE_LIMIT = {"B": 2**8, "H": 2**16, "i": 2**31}


class Codes:
    """One column of a streamed group as codes into its distinct values, each value held once:
    one byte per answer while the column has at most 256 distinct values, two up to 65,536, then
    four (widened as they come)."""

    def __init__(self):
        self.codes, self.values, self._code = array("B"), [], {}

    def add(self, value) -> int:
        code = self._code.get(value)
        if code is None:
            code = self._code[value] = len(self.values)
            self.values.append(value)
            if code == CODE_LIMIT[self.codes.typecode]:
                self.codes = array(WIDER[self.codes.typecode][0], self.codes)
        self.codes.append(code)
        return code

    def __getitem__(self, i: int):
        return self.values[self.codes[i]]

    def array(self) -> np.ndarray:
        """The codes as a numpy array (a view of the codes, not a copy)."""
        return (
            np.frombuffer(self.codes, dtype=self.codes.typecode)
            if len(self.codes)
            else np.zeros(0, dtype=np.int8)
        )

    def numbers(self) -> np.ndarray:
        """Each row's value, the values being integers, in the narrowest integer type that holds them."""
        values = np.asarray(self.values, dtype=np.int64)
        kind = (
            np.result_type(
                np.min_scalar_type(int(values.min())), np.min_scalar_type(int(values.max()))
            )
            if len(values)
            else np.int64
        )
        return values.astype(kind)[self.array()]


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
    check (:func:`lib.families.scrapbook.consistency.with_precedence`), ancestor by ancestor for
    :data:`BLOCK` rows at a time instead of a join of every pair."""
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
    ``absurd``, ``correct_all``, ``category``, ``correct_all_strict`` and ``category_strict``
    (:func:`lib.families.scrapbook.consistency.questions`' rules)."""
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
    appearance: ``cluster``, ``absurd``, ``consistent`` (:func:`S.queries`' rule)."""
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
    """Tables 8, 9, 10 and 15 as :func:`lib.families.scrapbook.task.scrapbook_tables` writes them:
    the error counts of answers and questions (:func:`lib.families.scrapbook.consistency.error_rows`),
    then the questions right in all versions (:func:`~lib.families.scrapbook.consistency.overall_rows`)."""
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
    """The group's metric rows, levels and errors (as :func:`lib.families.scrapbook.task.scrapbook_tables`
    makes them from the frame of every answer), and which answers the precedence check changed
    (correct on their own, not ``correct_strict``: a flag per answer)."""
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
    """:func:`lib.families.scrapbook.consistency._passes` on a level's questions of one concept."""
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


def _sum_rows(keys: tuple, ok: np.ndarray, label) -> list[tuple]:
    """(label(first row of a group), correct, n) per group of equal ``keys``, sorted by label."""
    if not len(ok):
        return []
    g, first = groups(*keys)
    n, k = _count(g, len(first)), _count(g, len(first), ok)
    return sorted((label(i), int(k[j]), int(n[j])) for j, i in enumerate(first.tolist()))


def levels(
    a: CodedAnswers, threshold: float = consistency.THRESHOLD, gate_types=consistency.GATE_TYPES
) -> pd.DataFrame:
    """:func:`lib.families.scrapbook.consistency.levels` of the group's answers: level gating and the
    per-level rows, by concept, type, subgroup and form (``all``: every version correct)."""
    gate = np.isin(a.type, [k for k, t in enumerate(a.types) if t in gate_types]) & ~a.absurd
    rows_at = np.flatnonzero(gate)
    present = {a.types[k] for k in np.unique(a.type[rows_at]).tolist()}
    types = [a.types.index(t) for t in gate_types if t in present]
    names, key, key_names = _names(a)
    correct, subgroup = a.correct, a.subgroup
    passed: set[str] = set()
    seen: set[str] = set()  # concepts asked about at lower levels
    rows = []
    for level in sorted(np.unique(a.level[rows_at]).tolist()):
        lv = rows_at[a.level[rows_at] == level]
        gated, concept, concept_names = _gated(a, names, lv, seen, passed)
        ckey = key[a.concepts[gated]]
        q, first = (
            groups(a.image[gated], a.query[gated], a.paraphrase[gated])
            if len(gated)
            else (gated, gated)
        )
        q_ok = _count(q, len(first), correct[gated]) == _count(q, len(first))
        q_type, q_sub, q_concept = a.type[gated][first], subgroup[gated][first], concept[first]
        now = {
            concept_names[c]
            for c in np.unique(q_concept).tolist()
            if _passes(q_concept == c, q_type, q_sub, q_ok, types, threshold)
        }
        t, f, s = a.type[gated], a.form[gated], subgroup[gated]
        for keys, ok, label in (
            (
                (ckey, concept, t, np.unique(s, return_inverse=True)[1].reshape(-1), f),
                correct[gated],
                lambda i: (
                    key_names[ckey[i]],
                    concept_names[concept[i]],
                    a.types[t[i]],
                    int(s[i]),
                    a.forms[f[i]],
                ),
            ),
            (
                (
                    ckey[first],
                    q_concept,
                    q_type,
                    np.unique(q_sub, return_inverse=True)[1].reshape(-1),
                ),
                q_ok,
                lambda j: (
                    key_names[ckey[first[j]]],
                    concept_names[q_concept[j]],
                    a.types[q_type[j]],
                    int(q_sub[j]),
                    "all",
                ),
            ),
        ):
            rows.extend(
                consistency._level_row(a.model, level, labels, k, n, now)
                for labels, k, n in _sum_rows(keys, ok, label)
            )
        seen.update(x for c in np.unique(a.concepts[lv]).tolist() for x in names[c])
        passed |= {part for c in now for part in c.split("|")}
    return pd.DataFrame(rows, columns=consistency.LEVEL_COLUMNS)


class Fixed(Mapping):
    """The answers ``fixed`` marks (one flag per answer of the group), each with ``scores``: what
    :meth:`lib.tasks.Scorer.corrections` returns, held as a byte per answer instead of a dict per
    corrected answer (a rescore asks of every answer whether it is corrected)."""

    def __init__(self, fixed: np.ndarray, scores: dict):
        self.fixed, self.scores = np.asarray(fixed, dtype=bool).tobytes(), scores

    def __contains__(self, i) -> bool:
        return isinstance(i, (int, np.integer)) and 0 <= i < len(self.fixed) and self.fixed[i] == 1

    def __getitem__(self, i) -> dict:
        if i not in self:
            raise KeyError(i)
        return dict(self.scores)

    def __iter__(self):
        return iter(np.flatnonzero(np.frombuffer(self.fixed, dtype=bool)).tolist())

    def __len__(self) -> int:
        return self.fixed.count(1)
