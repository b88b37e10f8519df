"""The Scrapbook protocol's group rules as pandas frame functions: the tests' reference
implementation of :mod:`lib.families.scrapbook.coded`, which stage 06 and :class:`ScrapbookQA` run.

These read the paper's rules one by one on a frame of every answer (joins and group-bys: hundreds
of megabytes on a paper-sized group, which is why lib runs the rules on integer codes instead).
They were lib's own reading until issue #68 kept one implementation there; here they stay
independent of lib's arrays, so that tests/scrapbook/test_coded.py, tests/test_rescore_stream.py
and tests/metrics/test_consistency.py prove lib's group rules against a second reading. What both
share is lib's reading of one answer (:func:`lib.families.scrapbook.consistency.read_answer`) and
its table rows (``overall_rows``, ``error_rows``, ``level_row``): written once, not compared.

:class:`FrameQA` is ``scrapbook.qa`` scoring by these functions, for the plain
:class:`lib.tasks.Scorer` to run beside the streamed one.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd

from lib.core.schema import ERROR
from lib.families.scrapbook.consistency import (
    ANSWER_DISAGREEMENT,
    CORRECT,
    ERROR_DISAGREEMENT,
    GATE_TYPES,
    INVALIDATED,
    LEVEL_COLUMNS,
    THRESHOLD,
    UNK,
    WRONG,
    concept_name,
    error_rows,
    errors_frame,
    level_row,
    overall_rows,
    query_id,
    read_answer,
)
from lib.families.scrapbook.tables import ERRORS, LEVELS
from lib.families.scrapbook.task import ScrapbookQA
from lib.tasks import Scoring, Tables, cluster_codes, metric_row


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
        _answer=scored.get("answer", None),
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
            gated = lv[lv["concepts"].map(lambda cs: all(c in passed for c in cs if c in seen))]  # noqa: B023 - called within this iteration
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
                    level_row(model, level, keys, int(sub["correct"].sum()), len(sub), now_passed)
                )
            for keys, sub in q.groupby(["concepts_key", "concept", "type", "subgroup"]):
                rows.append(
                    level_row(
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


# the frame's strings stay Python objects (shared with the records), not copied into pyarrow
# strings (a second copy of every answer's text)
TEXT_COLUMNS = (
    "model",
    "item_id",
    "image",
    "parent",
    "query",
    "type",
    "form",
    "expected",
    "output",
)
ITEM_COLUMNS = (
    "item_id",
    "image",
    "parent",
    "query",
    "type",
    "form",
    "level",
    "concepts",
    "subgroup",
    "absurd",
    "paraphrase",
    "expected",
)


def scrapbook_frame(preds, items, spaces: dict | None = None) -> pd.DataFrame:
    """One row per answer, in the shape :func:`score_versions` reads.
    Built column by column in one pass over ``items`` (any iterable, such as the lazily read
    :class:`lib.io.ItemsAt`): no item is held once its row is made (a list of row dicts, or the
    items themselves, would grow with every answer)."""
    columns: dict[str, list] = {k: [] for k in ITEM_COLUMNS}
    # each row's question kind, and each kind's answer vocabulary: the alternatives its enumerated
    # form lists (union over the items); kinds without an enumerated question use the expected answers
    kinds, seen, seen_kinds = [], defaultdict(set), {}
    # one object per distinct value of a column (labels, queries, concepts), however the items were read
    shared: dict[str, dict] = {k: {} for k in ITEM_COLUMNS}
    for it in items:
        m = it.meta
        for k, v in zip(
            ITEM_COLUMNS,
            (
                it.id,
                m["image"],
                m.get("parent"),
                query_id(m["query"]),
                m["type"],
                m["form"],
                m["level"],
                tuple(m["concepts"]),
                m["subgroup"],
                bool(m["absurd"]),
                m.get("paraphrase", 0),
                it.answer[0],
            ),
        ):
            columns[k].append(v if k == "item_id" else shared[k].setdefault(v, v))
        kind = (m["type"], m["query"].get("ask"))
        kinds.append(kind := seen_kinds.setdefault(kind, kind))
        if spaces is None:
            seen[kind].update(m.get("alternatives") or [a for a in it.answer if a != UNK])
    spaces = spaces or {k: tuple(sorted(v)) for k, v in seen.items()}
    labels: dict = {}
    columns = {
        "model": [labels.setdefault((p.model, p.style), f"{p.model} [{p.style}]") for p in preds],
        **columns,
        "output": [None if p.method == ERROR else p.raw for p in preds],
        "space": [spaces[k] for k in kinds],
    }
    return pd.DataFrame(
        {k: pd.Series(v, dtype=object if k in TEXT_COLUMNS else None) for k, v in columns.items()}
    )


def scrapbook_tables(
    frame: pd.DataFrame,
    valid: np.ndarray,
    truncated: np.ndarray,
    scoring: Scoring,
    clusters: np.ndarray | None = None,
) -> Tables:
    """The protocol's metric rows, levels and errors of a scored frame (one row per answer, in the
    group's order; ``valid``, ``truncated`` and ``clusters``: each answer's flags and image-chain
    code in that order). Every value handed to a bootstrap is a numpy array of 0/1 scores, which
    :func:`lib.metrics.stats.mean_ci` resamples by image chain."""
    n_inv, n_cut = int((~valid).sum()), int(truncated.sum())
    qs = questions(frame)
    chain = None if clusters is None else dict(zip(frame["image"], clusters))
    rows = []
    for form, sub in frame[["form", "correct"]].groupby(
        "form"
    ):  # the two columns it reads, not every one
        at = sub.index.to_numpy()
        rows.append(
            metric_row(
                f"form={form}",
                "accuracy",
                sub["correct"].to_numpy(dtype=float),
                len(sub),
                int((~valid[at]).sum()),
                scoring=scoring,
                n_truncated=int(truncated[at].sum()),
                clusters=None if clusters is None else clusters[at],
            )
        )
    qy = queries(frame)
    for filt in ("non-absurd", "full"):
        for metric, units, col in (
            ("accuracy_all_forms", qs, "correct_all"),
            ("accuracy_all_forms_strict", qs, "correct_all_strict"),
            ("consistent_rate", qy, "consistent"),
        ):
            q = units[~units["absurd"].astype(bool)] if filt == "non-absurd" else units
            rows.append(
                metric_row(
                    filt,
                    metric,
                    q[col].to_numpy(dtype=float),
                    len(q),
                    n_inv,
                    scoring=scoring,
                    n_truncated=n_cut,
                    clusters=None if chain is None else q["image"].map(chain).to_numpy(),
                )
            )
    errors = errors_frame(error_table(frame, qs), overall_table(frame, qs))
    return Tables(rows, {LEVELS: levels(frame), ERRORS: errors})


class FrameQA(ScrapbookQA):
    """``scrapbook.qa`` scored by the frame functions: :meth:`score` reads every answer into one
    frame (:func:`score_versions`), :meth:`aggregate` makes the tables from it
    (:func:`scrapbook_tables`). Run it through the plain :class:`lib.tasks.Scorer`."""

    def score(self, preds, items, scoring: Scoring) -> pd.DataFrame:
        frame = score_versions(scrapbook_frame(preds, items), exact=scoring.of(self).exact)
        for p, cat, ok, strict in zip(
            preds, frame["category"], frame["correct"], frame["correct_strict"]
        ):
            p.correct = bool(ok)
            p.scores = {"correct": float(ok), "correct_strict": float(strict)}
            p.meta["category"] = cat
        return frame

    def aggregate(self, preds, items, scoring: Scoring, state=None) -> Tables:
        frame = state if state is not None else self.score(preds, items, scoring)
        return scrapbook_tables(
            frame,
            np.array([bool(p.valid) for p in preds], dtype=bool),
            np.array([bool(p.truncated) for p in preds], dtype=bool),
            scoring,
            cluster_codes(self, items),
        )
