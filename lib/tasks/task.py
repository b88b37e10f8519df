"""What every task is: the base class, its answer reader, the prompt record, the one
image/question order.

A task turns an :class:`~lib.core.schema.Item` into a model request, says which answers are allowed
(its closed answer set, or ``None`` for free text), reads a response without guessing (its
:class:`Reader`), scores a group of predictions by the metrics it names
(:mod:`lib.tasks.scoring`) and aggregates those scores into metric rows, and reports them (its
headline, its papers' tables and figures). Evaluation (stage 06), the AF discriminator (stage 03)
and training validation (stage 05) all go through these methods, so a rule lives in one place;
how items are sampled is the engine's (:mod:`lib.eval.items`), what training keeps the trainer's
(:mod:`lib.training.data`), each from what the task says of an item (:meth:`Task.unit`,
:meth:`Task.facets`). The hooks are named after lmms-eval's (``doc_to_text`` -> :meth:`prompt`,
``doc_to_target`` -> :meth:`Reader.target`, ``process_results`` -> :meth:`score`).
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pandas as pd
import yaml

from lib import config
from lib.core.answers import parse_choice
from lib.core.paths import DATA
from lib.core.schema import (
    ERROR,
    FREE,
    INVALID,
    Constraint,
    Item,
    Prediction,
    Request,
    Response,
    is_constrained,
)
from lib.tasks.clusters import cluster_codes
from lib.tasks.scoring import Scorer, Scoring, Tables, metric_row, n_truncated, score_answers

QUESTION_FIRST = False  # images before the question unless a model spec says otherwise


@cache
def read_prompts(path: str) -> dict:
    """The prompt texts of a YAML file; data, not code."""
    return yaml.safe_load(Path(path).read_text())


def style_prompts() -> dict:
    """The prompt styles' texts (``lib/data/prompts/styles.yaml``: chain of thought's triggers); a
    task's own texts are its family's (:meth:`Task.prompts`)."""
    return read_prompts(str(DATA / "prompts" / "styles.yaml"))


def wants_question_first(spec: dict) -> bool:
    """Does this model get the question before its images? The model spec's ``question_first``."""
    return bool(spec.get("question_first", QUESTION_FIRST))


def user_content(text: str | None, images, question_first: bool = QUESTION_FIRST) -> list[dict]:
    """One user turn's content parts: the images and the text, in the order the model wants. An
    image given as None is a bare placeholder (what a chat template renders during training)."""
    parts = [{"type": "image"} if im is None else {"type": "image", "image": im} for im in images]
    text_part = [{"type": "text", "text": text}] if text is not None else []
    return text_part + parts if question_first else parts + text_part


@dataclass(frozen=True)
class Prompt:
    """What a model is asked: text, images (absolute paths), the closed answer set if any, and the
    answer trigger used after chain-of-thought reasoning."""

    text: str
    images: tuple[str, ...]
    choices: tuple[str, ...] | None
    answer_trigger: str


@dataclass(frozen=True)
class TaskOptions:
    """A task's settings: what ``tasks: {<task name>: {...}}`` in stage 06's params may set. Every
    task has these; a family with settings of its own subclasses it (its task's ``Options``)."""

    HUB_FIELDS: typing.ClassVar[tuple] = ()  # fields holding hub ids (checked by the preflight)

    max_new_tokens: int | None = None  # its answers' token limit (None: the stage's max_new_tokens)
    # the judge (by name, lib.tasks.judges) that rates its answers when the stage has a judge model
    judge: str | None = None


@dataclass
class Results:
    """What stage 06 wrote, as the tasks' :meth:`Task.paper` reads it: ``metrics.csv`` and
    the families' score tables by name (:meth:`table`)."""

    metrics: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame:
        """The score table ``name`` (``<name>.csv``), an empty frame where the run has none."""
        df = self.tables.get(name)
        return pd.DataFrame() if df is None else df


@dataclass(frozen=True)
class Unit:
    """Items a task scores together (:meth:`Task.unit`): one score may rest on all their answers
    (Scrapbook's protocol: a query's forms on one image chain, consistency and precedence across
    them). A sample keeps a unit whole, units of lower ``order`` first (Scrapbook's level gating
    starts from level 1); a score that changed with another answer of its unit is explained by
    that answer (:mod:`lib.compare.explain`)."""

    key: Hashable
    order: float = 0


class Reader:
    """How a task's answers are read and shown, beside the task (lmms-eval's ``doc_to_target`` and
    its filters): the gold answer, the text a model is trained to give, a reply read without
    guessing, and a read answer as stored and as a person sees it. This default reads free text,
    or one of a closed answer set; a family with answers of another shape subclasses it."""

    def target(self, item: Item):
        """The gold answer in the form :meth:`read` returns (default: the reference texts)."""
        return list(item.answer)

    def target_text(self, item: Item) -> str:
        """The text a model is trained to produce for ``item`` (stage 05)."""
        return str(item.answer[0])

    def read(self, item: Item, text: str, choices, constrained_value=None) -> tuple:
        """``(answer, method)`` from a reply: a constrained value is taken as it is when it is one of
        the ``choices`` (the task's closed answer set); otherwise parsed. A closed answer set gives
        ``(None, INVALID)`` when the reply names no single answer; None: free text."""
        if choices is None:
            return text.strip(), FREE
        if constrained_value is not None:
            if constrained_value in choices:
                return constrained_value, "constrained"
            return None, INVALID
        return parse_choice(text, choices)

    def answer_text(self, item: Item, stored) -> str:
        """A stored read answer (:meth:`jsonable`'s form) as a reader sees it; empty for none."""
        return "" if stored is None else str(stored)

    def jsonable(self, value):
        """A read answer as stored in ``predictions.jsonl``."""
        return sorted(value) if isinstance(value, frozenset) else value


class Label(Reader):
    """One label of a closed set (``Y``/``N``, a colour): the gold answer is the item's first."""

    def target(self, item: Item):
        return item.answer[0]


class Task:
    """A task: subclasses set ``name`` and override what differs (usually :meth:`prompt`,
    :meth:`choices`, :meth:`paper`), name their metrics (:mod:`lib.tasks.scoring`) and answer
    :class:`Reader`. The defaults describe a free-text task scored by accuracy."""

    name: str = ""
    open_answer: bool = False  # free-text answers against references (what LAVE judges)
    # the validation metric stage 05 picks its best checkpoint by (a key of its accuracy table):
    # "accuracy" (micro) or "macro" (the mean over question types)
    validation_metric: str = "accuracy"
    # the (subset, metric) row a report leads with
    headline: tuple[str, str] = ("all", "accuracy")
    # the per-answer score (a key of Prediction.scores) the headline is made of, where the headline
    # is not the mean of a score of that name (a macro average); None: the headline's own name.
    # Two runs are compared item by item on it (lib.compare.changes)
    headline_score: str | None = None
    Options: typing.ClassVar[type] = TaskOptions  # what its params block may set
    reader: Reader = Reader()  # how its answers are read, stored and shown
    # the per-answer metrics it scores unless stage 06's params list others (lib.tasks.scoring)
    metrics: tuple[str, ...] = ("accuracy",)
    correct_if: str | None = "accuracy"  # the score that makes an answer ``correct`` (None: none)

    # --- settings and items -------------------------------------------------------------------------
    @classmethod
    def prompts(cls) -> dict:
        """The task's prompt texts: ``prompts.yaml`` in its family's folder, beside the module that
        defines the task."""
        return read_prompts(
            str(Path(sys.modules[cls.__module__].__file__).with_name("prompts.yaml"))
        )

    @classmethod
    def options(cls, block: dict | None = None, where: str = "") -> TaskOptions:
        """The task's options from its params block (``tasks: {name: block}``): unknown keys and wrong
        types raise :class:`lib.config.ParamsError` naming ``where`` and the key."""
        where = where or f"tasks.{cls.name}"
        try:
            opts = config.dataclass_from(cls.Options, block or {}, where)
        except (TypeError, ValueError) as e:
            raise (
                config.ParamsError(f"{where}: {e}") if not isinstance(e, config.ParamsError) else e
            ) from None
        if opts.judge is not None:
            # deferred on purpose: the registry imports the families, which import this module
            from lib.tasks.registry import get_judge

            get_judge(opts.judge, f"{where}.judge")
        return opts

    @classmethod
    def make_item(
        cls,
        id: str,
        images: list[str],
        question: str = "",
        answer: list | tuple = (),
        options: list[str] | None = None,
        meta: dict | None = None,
    ) -> Item:
        """An item of this task; families with fields of their own wrap it with the arguments they need."""
        return Item(
            id=id,
            task=cls.name,
            question=question,
            images=list(images),
            options=options,
            answer=list(answer),
            meta=dict(meta or {}),
        )

    # --- results ------------------------------------------------------------------------------------
    def subset(self, item: Item) -> str:
        """The subset an item is shown under when its answers are browsed (its metric rows' finest
        common grouping: a question type, a form, a part); ``all`` by default."""
        return "all"

    @classmethod
    def rows(cls, table: pd.DataFrame) -> pd.DataFrame:
        """The rows of a results table (``metrics.csv`` and the like) that are this task's."""
        return table[table["task"] == cls.name]

    def facets(self, item: Item) -> dict:
        """What an item is, under the names training filters and groups by (:mod:`lib.training`):
        ``type`` (the question type per-type accuracies run over), and for questions generated from
        a scene ``group``, ``form``, ``level``, ``target`` (what the question describes: ``color``,
        ``shape``, ``color+shape``) and ``absurd``. A filter leaves an item without its facet alone.
        By default the item's own ``meta.type``, when it has one."""
        kind = item.meta.get("type")
        return {"type": kind} if isinstance(kind, str) and kind else {}

    def paper(self, results: Results) -> dict[str, object]:
        """The papers' tables (DataFrames) and figures (matplotlib figures) this task's results
        fill, by name; none by default."""
        return {}

    # --- asking -----------------------------------------------------------------------------------
    def choices(self, item: Item) -> tuple[str, ...] | None:
        """The closed answer set (what constrained decoding is restricted to), or None for free text."""
        return None

    def prompt(self, item: Item, root) -> Prompt:
        """The prompt of ``item``; image paths are resolved against the dataset folder ``root``."""
        raise NotImplementedError

    def request(
        self,
        item: Item,
        root,
        *,
        question_first: bool = QUESTION_FIRST,
        constrain: bool = True,
        max_new_tokens: int,
        seed: int = 0,
        with_images: bool = True,
    ) -> Request:
        """The zero-shot request for ``item`` (constrained to :meth:`choices` when ``constrain``)."""
        p = self.prompt(item, root)
        images = p.images if with_images else ()
        return Request(
            [{"role": "user", "content": user_content(p.text, images, question_first)}],
            max_new_tokens=max_new_tokens,
            seed=seed,
            constraint=constraint(p.choices, constrain),
        )

    # --- answers ----------------------------------------------------------------------------------
    def read_response(self, item: Item, resp: Response) -> tuple:
        """``(answer, method, valid)`` of a model response: a constrained answer is taken as decoded
        (its method kept), free text is parsed by the task's :attr:`reader`; an unreadable or empty
        answer is invalid, a failed call (``method="error"``, whose text may keep what the server
        sent) has no answer. Nothing a reply holds makes this raise: a reply that is not text, or
        that breaks the reader, is invalid (the item itself was checked when its request was built)."""
        if resp.method == ERROR:
            return None, ERROR, False
        if not isinstance(resp.text, str):  # an old cache's list, number or object
            return None, INVALID, False
        constrained = is_constrained(resp.method) and resp.valid
        try:
            value, method = self.reader.read(
                item, resp.text, self.choices(item), resp.parsed if constrained else None
            )
        except Exception:  # e.g. a constrained value that is no text; one reply, never the batch
            return None, INVALID, False
        if constrained and value is not None:
            method = resp.method
        if method == INVALID or value is None:
            return None, INVALID, False
        if method == FREE and not str(value).strip():
            return None, INVALID, False  # an empty answer to an open question: never scored as text
        return value, method, True

    # --- scoring ----------------------------------------------------------------------------------
    def score(self, preds: list[Prediction], items: list[Item], scoring: Scoring):
        """Fill ``scores`` and ``correct`` of a group of predictions (one model, dataset, style) from
        their read answers, by the metrics named (:func:`lib.tasks.scoring.score_answers`); returns
        whatever :meth:`aggregate` can reuse (or None)."""
        score_answers(self, preds, items, scoring)

    def aggregate(
        self, preds: list[Prediction], items: list[Item], scoring: Scoring, state=None
    ) -> Tables:
        """Metric rows of a scored group, one per score over ``all`` (the ``invalid_rate`` row is
        added by the caller)."""
        n, n_inv, n_cut = len(preds), sum(not p.valid for p in preds), n_truncated(preds)
        clusters = cluster_codes(self, items)
        return Tables(
            [
                metric_row(
                    "all",
                    m,
                    [p.scores[m] for p in preds],
                    n,
                    n_inv,
                    scoring=scoring,
                    n_truncated=n_cut,
                    clusters=clusters,
                )
                for m in (preds[0].scores if preds else ())
            ]
        )

    def scorer(self, scoring: Scoring) -> Scorer:
        """What scores a group of this task's predictions a chunk at a time (:class:`Scorer`)."""
        return Scorer(self, scoring)

    def unit(self, item: Item) -> Unit | None:
        """The items ``item`` is scored together with (:class:`Unit`); None: it is scored alone."""
        return None

    def cluster(self, item: Item) -> Hashable:
        """What ``item``'s answer is not independent of, which intervals resample whole: by default
        its first image (questions about one image move together); a task whose questions span
        several images of one scene (Scrapbook's image chain) names that."""
        return item.images[0] if item.images else item.id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def constraint(choices, constrain: bool = True) -> Constraint | None:
    """The choice constraint of a closed answer set (None for free text, or when switched off)."""
    if not (constrain and choices):
        return None
    return Constraint(choices=tuple(choices))
