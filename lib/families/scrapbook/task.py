"""``scrapbook.qa``: a Scrapbook question as generated (its form is in its text), scored by the
paper's protocol (:mod:`lib.families.scrapbook.consistency`): matching per form, error categories,
consistency over versions, precedence over ancestor images, level gating.

The closed answer set is the enumerated form's listed alternatives (constrained decoding may use
it); the other forms are asked and read as free text, as in the paper. Scoring always reads the
model's *raw* output - never an answer parsed out of it - so "Yes, there is a circle." is not
"yes" under the exact forms. Items are sampled by query (one query on one image chain, every
paraphrase and version), lowest levels first.

Stage 06 scores a group a chunk at a time with :class:`ScrapbookScorer`, which keeps each answer's
question and reading as codes (:class:`Codes`) and runs the protocol's group rules on them
(:mod:`lib.families.scrapbook.coded`); :func:`lib.eval.score.score_group` runs the same scorer on
predictions and items held in memory.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from lib.core.schema import ERROR, Item
from lib.families.scrapbook import coded, consistency, figures
from lib.families.scrapbook.tables import ERRORS, LEVELS
from lib.tasks import Prompt, Results, Scorer, Scoring, Tables, Task, TaskOptions, Unit
from lib.tasks.styles import ZeroShot

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


READ_MEMO = (
    2**16
)  # distinct (output, question kind) readings remembered: a model's answers repeat, but not all


class ScrapbookScorer(Scorer):
    """``scrapbook.qa`` streamed: :meth:`add` keeps each answer's question as a few small codes
    (:class:`Codes`: image, parent, query, paraphrase, type, form, level, subgroup, concepts,
    expected answer, question kind) and gathers each kind's answer vocabulary; :meth:`score`
    reads the answer (the protocol's
    :func:`lib.families.scrapbook.consistency.read_answer`, against the whole group's vocabulary)
    and keeps its category and plausible answer as codes; :meth:`tables` runs the protocol's
    precedence, question, level and error rules on those codes
    (:func:`lib.families.scrapbook.coded.tables`). No prediction, item or frame of every answer is
    held: a paper-sized group keeps about twenty bytes per answer."""

    CODED = (
        "image",
        "parent",
        "query",
        "paraphrase",
        "type",
        "form",
        "level",
        "subgroup",
        "concepts",
        "expected",
        "kind",
    )

    def __init__(self, task: Task, scoring: Scoring):
        super().__init__(task, scoring)
        self.exact = scoring.of(task).exact
        self.coded = {k: Codes() for k in self.CODED}
        self.absurd = bytearray()
        self.category, self.answer = array("b"), Codes()
        self.seen: dict = defaultdict(set)
        self.model = None
        self._spaces = None
        self._fixed = None
        self._read = lru_cache(maxsize=READ_MEMO)(self._read_answer)

    def _add(self, preds, items) -> None:
        c = self.coded
        for p, it in zip(preds, items):
            if self.model is None:
                self.model = f"{p.model} [{p.style}]"
            m = it.meta
            kind = (m["type"], m["query"].get("ask"))
            for k, v in (
                ("image", m["image"]),
                ("parent", m.get("parent")),
                ("query", consistency.query_id(m["query"])),
                ("paraphrase", m.get("paraphrase", 0)),
                ("type", m["type"]),
                ("form", m["form"]),
                ("level", m["level"]),
                ("subgroup", m["subgroup"]),
                ("concepts", tuple(m["concepts"])),
                ("expected", it.answer[0]),
                ("kind", kind),
            ):
                c[k].add(v)
            self.absurd.append(bool(m["absurd"]))
            self.seen[kind].update(
                m.get("alternatives") or [a for a in it.answer if a != consistency.UNK]
            )

    def _read_answer(self, output, expected: int, form: int, kind: int) -> tuple:
        c = self.coded
        k = c["kind"].values[kind]
        return consistency.read_answer(
            output,
            c["expected"].values[expected],
            c["form"].values[form],
            self._spaces[k],
            k[0] == "counting",
            self.exact,
        )

    def score(self, p):
        if self._spaces is None:  # every answer added: each kind's vocabulary is whole
            self._spaces = {k: tuple(sorted(v)) for k, v in self.seen.items()}
        i, c = self._next, self.coded
        self._next += 1
        category, answer = self._read(
            None if p.method == ERROR else p.raw,
            c["expected"].codes[i],
            c["form"].codes[i],
            c["kind"].codes[i],
        )
        ok = category == consistency.CORRECT
        self.category.append(coded.CATEGORY_NAMES.index(category))
        self.answer.add(answer)
        p.correct = ok
        p.scores = {"correct": float(ok), "correct_strict": float(ok)}  # precedence: corrections()
        p.meta["category"] = category
        return p

    def answers(self) -> coded.CodedAnswers:
        """The group's scored answers as arrays of codes (views of what :meth:`add` and :meth:`score` kept)."""
        c = self.coded
        images = {v: k for k, v in enumerate(c["image"].values)}
        # a parent as its image's code: none, or an image no answer is about, as the protocol reads them
        parent = np.array(
            [
                coded.NO_PARENT if v is None else images.get(v, coded.UNEVALUATED)
                for v in c["parent"].values
            ],
            dtype=np.int32,
        )
        arrays = {
            k: c[k].array() for k in ("image", "query", "paraphrase", "type", "form", "concepts")
        }
        return coded.CodedAnswers(
            model=self.model,
            parent=parent[c["parent"].array()],
            **arrays,
            types=c["type"].values,
            forms=c["form"].values,
            level=c["level"].numbers(),
            subgroup=c["subgroup"].numbers(),
            concept_values=c["concepts"].values,
            absurd=np.frombuffer(self.absurd, dtype=bool),
            category=np.frombuffer(self.category, dtype=np.int8),
            answer=self.answer.array(),
            valid=np.frombuffer(self.valid, dtype=bool),
            truncated=np.frombuffer(self.truncated, dtype=bool),
            cluster=self.clusters.codes(),
        )

    def tables(self) -> Tables:
        if self._tables is None:
            self._read.cache_clear()
            self._tables, self._fixed = coded.tables(self.answers(), self.scoring)
        return self._tables

    def corrections(self) -> Mapping[int, dict]:
        """Answers right on their own but wrong on a simpler image: ``correct_strict`` is 0."""
        self.tables()
        return Fixed(self._fixed, {"correct": 1.0, "correct_strict": 0.0})


@dataclass(frozen=True)
class ScrapbookOptions(TaskOptions):
    """``scrapbook.qa``'s settings: how the condition and enumerated forms are matched - ``paper``
    (the raw answer, case aside, as the paper's protocol) or ``words`` (the lenient reading)."""

    exact: str = "paper"

    def __post_init__(self):
        if self.exact not in consistency.EXACT_MODES:
            raise ValueError(f"exact={self.exact!r}: choose one of {consistency.EXACT_MODES}")


def target_kind(meta: dict) -> str:
    """What a question's target describes: ``color``, ``shape`` or ``color+shape`` (``object``
    for none)."""
    target = (meta.get("query") or {}).get("target") or {}
    return "+".join(k for k in ("color", "shape") if k in target) or "object"


class ScrapbookQA(Task):
    name = "scrapbook.qa"
    Options = ScrapbookOptions
    headline = (
        "non-absurd",
        "accuracy_all_forms",
    )  # Table 8: a question is right when all its forms are
    headline_score = "correct"  # each form's answer, the part of the all-forms accuracy an item has

    def choices(self, item):
        if item.meta.get("form") == "enumerated" and item.meta.get("alternatives"):
            return tuple(item.meta["alternatives"])
        return None

    def prompt(self, item, root) -> Prompt:
        p = self.prompts()
        return Prompt(
            p["question"].format(question=item.question),
            tuple(str(Path(root) / im) for im in item.images),
            self.choices(item),
            p["answer_trigger"],
        )

    def scorer(self, scoring: Scoring) -> Scorer:
        return ScrapbookScorer(self, scoring)

    def subset(self, item: Item) -> str:
        return f"form={item.meta['form']}"

    def paper(self, results: Results) -> dict[str, object]:
        """Scrapbook Table 8 (overall), Tables 9/10/15 (aggregated error types) and Tables 11-14
        (level 2 by position, type and subgroup) from stage 06's errors and levels, and Figures
        17-31 (level 1 by concept and form), zero-shot, per dataset and model."""
        out, errors, levels = {}, results.table(ERRORS), results.table(LEVELS)
        if len(errors):
            q = errors[errors["unit"] == "questions"]
            out["table8_overall"] = q.pivot_table(
                index=["dataset", "filter"], columns=["model", "style"], values="accuracy"
            ).round(4)
            agg = errors[errors["unit"] == "aggregated"]
            out["tables9_10_15_errors"] = agg.pivot_table(
                index=["dataset", "category"], columns=["model", "style", "filter"], values="count"
            )
        if len(levels):
            two = levels[(levels["level"] == 2) & (levels["form"] == "all")].copy()
            if len(two):
                two["cell"] = [f"{c} / {n}" for c, n in zip(two["correct"], two["n"])]
                out["tables11_14_level2"] = two.pivot_table(
                    index=["dataset", "model", "style", "concepts", "type"],
                    columns="subgroup",
                    values="cell",
                    aggfunc="first",
                )
            out.update(
                (f"scrapbook_level1_{dataset}_{model}", figures.scrapbook_level1(lv)[0])
                for (dataset, model, style), lv in levels.groupby(["dataset", "model", "style"])
                if style == ZeroShot.name and (lv["level"] == 1).any()
            )
        return out

    def unit(self, item: Item) -> Unit:
        """One query on one image chain, every form of it: scored together by the protocol, level 1
        before level 2."""
        return Unit(
            (tuple(item.meta.get("unit") or ()), consistency.query_id(item.meta["query"])),
            item.meta["level"],
        )

    def cluster(self, item: Item) -> tuple:
        """The image chain (``meta.unit``: one scene and the images derived from it), whose
        questions' answers move together and precede each other: intervals resample chains."""
        return tuple(item.meta.get("unit") or ()) or item.meta["image"]

    def facets(self, item: Item) -> dict:
        m = item.meta
        return {
            "type": m.get("type"),
            "group": m.get("group"),
            "form": m.get("form"),
            "level": m.get("level"),
            "target": target_kind(m),
            "absurd": m.get("absurd") is True,
        }
