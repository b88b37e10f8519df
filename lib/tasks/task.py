"""What every task is: the base class, the prompt record, the one image/question order, metric rows.

A task turns an :class:`~lib.core.schema.Item` into a model request, says which answers are allowed
(its closed answer set, or ``None`` for free text), reads a response without guessing, scores a
group of predictions and aggregates those scores into metric rows, and reports them (its headline,
its papers' tables). Evaluation (stage 06), the AF discriminator (stage 03) and training
validation (stage 05) all go through these methods, so a rule lives in one place; how items are
sampled is the engine's (:mod:`lib.eval.items`), what training keeps the trainer's
(:mod:`lib.training.data`), each from what the task says of an item (:meth:`Task.unit`,
:meth:`Task.facets`). The hooks are named after lmms-eval's (``doc_to_text`` -> :meth:`prompt`,
``doc_to_target`` -> :meth:`target`, ``process_results`` -> :meth:`score`).
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
from lib.metrics import text as text_metrics
from lib.metrics.stats import mean_ci, n_clusters
from lib.tasks.clusters import Clusters, cluster_codes

QUESTION_FIRST = False  # images before the question unless a model spec says otherwise
TEXT_METRICS = ("bleu", "rouge_l", "meteor", "bertscore", "cider")  # lib.metrics.text's, by name


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


@dataclass(frozen=True)
class Scoring:
    """The settings scoring may use: the bootstrap's and each task's options as given in params
    (``tasks``: task name -> its block); a task reads its own with :meth:`of`."""

    n_resamples: int = 1000
    seed: int = 0
    tasks: dict = field(default_factory=dict)

    def of(self, task: Task) -> TaskOptions:
        """``task``'s options: its params block over its ``Options`` defaults."""
        return task.options(self.tasks.get(task.name) or {})


@dataclass
class Tables:
    """What a task's :meth:`Task.aggregate` gives: metric rows (subset, metric, value, CI, n,
    n_invalid) and, for tasks with a protocol of their own, extra frames by name (the tables their
    family declares in ``SCORE_TABLES``, :mod:`lib.tasks.registry`; stage 06 adds the group's
    dataset, style and model and writes each as ``<name>.csv``)."""

    rows: list[dict] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


@dataclass
class Results:
    """What stage 06 wrote, as the tasks' :meth:`Task.paper_tables` read it: ``metrics.csv`` and
    the families' score tables by name (:meth:`table`)."""

    metrics: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame:
        """The score table ``name`` (``<name>.csv``), an empty frame where the run has none."""
        df = self.tables.get(name)
        return pd.DataFrame() if df is None else df


class Scorer:
    """One group's scoring (one model, dataset, task and style), fed its predictions a chunk at a
    time so that a rescore streams its predictions file: :meth:`add` each chunk (answers already
    read), then :meth:`score` every prediction again in the same order (as read back from the
    file), then :meth:`tables` and :meth:`corrections`. Beside it, every group's ``valid`` and
    ``truncated`` flags (one byte per answer) for the rows the stage adds.

    This default holds the group's predictions and items and calls :meth:`Task.score` and
    :meth:`Task.aggregate` on them whole: right for hand-annotated sets (thousands of answers)
    whose metrics (BERTScore batches, a macro F1) need every answer at once. A task whose metrics
    reduce to per-answer codes and per-unit counts streams instead (Scrapbook's scorer holds a few
    bytes per answer, no prediction objects)."""

    def __init__(self, task: Task, scoring: Scoring):
        self.task, self.scoring = task, scoring
        self.valid, self.truncated = bytearray(), bytearray()
        self.clusters = Clusters()  # each answer's cluster, for the intervals of the stage's rows
        self._preds: list[Prediction] = []
        self._items: list[Item] = []
        self._state, self._next, self._tables = None, 0, None

    def add(self, preds: list[Prediction], items: list[Item]) -> None:
        """Take the next chunk of the group's predictions (their answers read) and their items."""
        self.valid.extend(bool(p.valid) for p in preds)
        self.truncated.extend(bool(p.truncated) for p in preds)
        self.clusters.add(self.task, items)
        self._add(preds, items)

    def _add(self, preds: list[Prediction], items: list[Item]) -> None:
        self._preds.extend(preds)
        self._items.extend(items)

    def score(self, p: Prediction) -> Prediction:
        """The group's next prediction (in :meth:`add`'s order) scored: ``p`` is that prediction as
        written after :meth:`add`; the one returned is what the predictions file keeps."""
        if self._next == 0:
            self._state = self.task.score(self._preds, self._items, self.scoring)
        self._next += 1
        return self._preds[self._next - 1]

    def tables(self) -> Tables:
        """The group's metric rows and tables (:meth:`Task.aggregate`), once every answer is scored."""
        if self._tables is None:
            self._tables = self.task.aggregate(self._preds, self._items, self.scoring, self._state)
        return self._tables

    def corrections(self) -> dict[int, dict]:
        """Scores that only the whole group decides, changed after :meth:`score` wrote them: the
        group index of a prediction -> its new ``scores``. None by default."""
        return {}


def metric_row(
    subset: str,
    metric: str,
    values=None,
    n: int = 0,
    n_invalid: int = 0,
    ci=None,
    scoring: Scoring | None = None,
    n_truncated: int = 0,
    clusters=None,
) -> dict:
    """One metric row: the mean of ``values`` with its bootstrap interval over ``clusters`` (each
    value's :meth:`Task.cluster` code; None: the values are independent), or a given ``(value,
    low, high)`` computed over those clusters; beside it how many answers it covers, over how many
    clusters, how many could not be read (``n_invalid``) and how many were cut off by the token
    limit (``n_truncated``)."""
    if ci is None:
        s = scoring or Scoring()
        ci = mean_ci(values, n_resamples=s.n_resamples, seed=s.seed, clusters=clusters)
    value, low, high = ci
    return {
        "subset": subset,
        "metric": metric,
        "value": value,
        "ci_low": low,
        "ci_high": high,
        "n": n,
        "n_clusters": n if clusters is None else n_clusters(clusters, n),
        "n_invalid": n_invalid,
        "n_truncated": n_truncated,
    }


def n_truncated(preds) -> int:
    """How many answers were cut off by the token limit."""
    return sum(bool(p.truncated) for p in preds)


def text_scores(
    preds, refs: list[list[str]], names, bertscore_model: str | None = None
) -> dict[str, list[float]]:
    """Per-answer text metrics; an invalid answer is scored as the empty string and then set to 0."""
    cands = [p.parsed if p.valid else "" for p in preds]
    table = {}
    for name in names:
        fn = getattr(text_metrics, name)
        table[name] = (
            fn(cands, refs, model=bertscore_model) if name == "bertscore" else fn(cands, refs)
        )
    return table


def set_text_scores(preds, table: dict) -> None:
    for i, p in enumerate(preds):
        p.scores = {k: (float(v[i]) if p.valid else 0.0) for k, v in table.items()}


@dataclass(frozen=True)
class Unit:
    """Items a task scores together (:meth:`Task.unit`): one score may rest on all their answers
    (Scrapbook's protocol: a query's forms on one image chain, consistency and precedence across
    them). A sample keeps a unit whole, units of lower ``order`` first (Scrapbook's level gating
    starts from level 1); a score that changed with another answer of its unit is explained by
    that answer (:mod:`lib.compare.explain`)."""

    key: Hashable
    order: float = 0


class Task:
    """A task: subclasses set ``name`` and override what differs (usually ``prompt``, ``choices``,
    ``score`` and ``aggregate``). The defaults describe a free-text task."""

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

    def paper_tables(self, results: Results) -> dict[str, pd.DataFrame]:
        """The papers' tables this task's results fill (name -> table); none by default."""
        return {}

    def paper_figures(self, results: Results) -> dict[str, object]:
        """The papers' figures this task's results fill (name -> matplotlib figure); none by default."""
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
    def target(self, item: Item):
        """The gold answer in the form :meth:`read` returns (default: the reference texts)."""
        return list(item.answer)

    def target_text(self, item: Item) -> str:
        """The text a model is trained to produce for ``item`` (stage 05)."""
        return str(item.answer[0])

    def read(self, item: Item, text: str, constrained_value=None) -> tuple:
        """``(answer, method)`` from a reply: a constrained value is taken as it is when it is one of
        the choices; otherwise parsed. A closed answer set gives ``(None, INVALID)`` when the reply
        names no single answer."""
        choices = self.choices(item)
        if choices is None:
            return text.strip(), FREE
        if constrained_value is not None:
            return (
                (constrained_value, "constrained")
                if constrained_value in choices
                else (None, INVALID)
            )
        return parse_choice(text, choices)

    def read_response(self, item: Item, resp: Response) -> tuple:
        """``(answer, method, valid)`` of a model response: a constrained answer is taken as decoded
        (its method kept), free text is parsed; an unreadable or empty answer is invalid, a failed call
        (``method="error"``, whose text may keep what the server sent) has no answer. Nothing a reply
        holds makes this raise: a reply that is not text, or that breaks the reader, is invalid (the
        item itself was checked when its request was built)."""
        if resp.method == ERROR:
            return None, ERROR, False
        if not isinstance(resp.text, str):  # an old cache's list, number or object
            return None, INVALID, False
        constrained = is_constrained(resp.method) and resp.valid
        try:
            value, method = self.read(item, resp.text, resp.parsed if constrained else None)
        except Exception:  # e.g. a constrained value that is no text; one reply, never the batch
            return None, INVALID, False
        if constrained and value is not None:
            method = resp.method
        if method == INVALID or value is None:
            return None, INVALID, False
        if method == FREE and not str(value).strip():
            return (
                None,
                INVALID,
                False,
            )  # an empty answer to an open question: counted, never scored as text
        return value, method, True

    # --- scoring ----------------------------------------------------------------------------------
    def score(self, preds: list[Prediction], items: list[Item], scoring: Scoring):
        """Fill ``scores`` and ``correct`` of a group of predictions (one model, dataset, style) from
        their read answers; returns whatever :meth:`aggregate` can reuse (or None)."""
        for p, it in zip(preds, items):
            p.correct = bool(p.valid and p.parsed == self.target(it))
            p.scores = {"accuracy": float(p.correct)}

    def aggregate(
        self, preds: list[Prediction], items: list[Item], scoring: Scoring, state=None
    ) -> Tables:
        """Metric rows of a scored group (the ``invalid_rate`` row is added by the caller)."""
        n, n_inv = len(preds), sum(not p.valid for p in preds)
        return Tables(
            [
                metric_row(
                    "all",
                    "accuracy",
                    [p.scores["accuracy"] for p in preds],
                    n,
                    n_inv,
                    scoring=scoring,
                    n_truncated=n_truncated(preds),
                    clusters=cluster_codes(self, items),
                )
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

    def answer_text(self, item: Item, stored) -> str:
        """A stored read answer (:meth:`jsonable`'s form) as a reader sees it; empty for none."""
        return "" if stored is None else str(stored)

    def jsonable(self, value):
        """A read answer as stored in ``predictions.jsonl``."""
        return sorted(value) if isinstance(value, frozenset) else value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def constraint(choices, constrain: bool = True) -> Constraint | None:
    """The choice constraint of a closed answer set (None for free text, or when switched off)."""
    if not (constrain and choices):
        return None
    return Constraint(choices=tuple(choices))
