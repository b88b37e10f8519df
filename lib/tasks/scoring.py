"""How a task's answers are scored: metrics registered by name, the settings scoring takes, the
scorer a group streams through, and the rows of ``metrics.csv``.

A metric is a function over a group's read answers, registered by name (``@metric("bleu")``, as
inspect_ai's ``@metric`` and lmms-eval's ``metric_list`` name theirs): ``fn(preds, items, task,
scoring)`` gives each answer's value. A task names the ones it scores by default
(:attr:`lib.tasks.Task.metrics`); stage 06's ``metrics:`` may list others (:meth:`Scoring.names`).
The family-neutral ones are here; a paper's own is registered in its family's folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from lib.core.schema import Item, Prediction
from lib.metrics import text as text_metrics
from lib.metrics.stats import mean_ci, n_clusters
from lib.tasks.clusters import Clusters

TEXT_METRICS = (
    "bleu",
    "rouge_l",
    "meteor",
    "bertscore",
    "cider",
)  # what a description is scored by
OPEN_METRICS = ("exact_match", "anls", "vqa_accuracy")  # what a short open answer is scored by


@dataclass(frozen=True)
class Metric:
    """A per-answer metric: ``score(preds, items, task, scoring)`` -> each answer's value (an
    invalid answer's is set to 0 after). ``text``: free text against the references, which any
    task with open answers may score."""

    name: str
    score: Callable
    text: bool = False


METRICS: dict[str, Metric] = {}  # every metric by name (the families' once they are imported)


def metric(name: str, text: bool = False) -> Callable:
    """Register the decorated function as the metric ``name`` (two functions for one name raise)."""

    def register(fn: Callable) -> Callable:
        old = METRICS.get(name)  # the same function registered again: a module imported anew
        if old is not None and old.score.__qualname__ != fn.__qualname__:
            raise ValueError(f"metric {name!r} is already {old.score.__module__}'s")
        METRICS[name] = Metric(name, fn, text)
        return fn

    return register


@metric("accuracy")
def accuracy(preds, items, task, scoring) -> list[float]:
    """1 where the read answer is the task's target."""
    return [float(p.valid and p.parsed == task.reader.target(it)) for p, it in zip(preds, items)]


def _text_metric(name: str) -> Callable:
    def score(preds, items, task, scoring) -> list[float]:
        cands = [p.parsed if p.valid else "" for p in preds]
        refs = [task.reader.target(it) for it in items]
        if name == "bertscore":  # the model a task's options name (None: the local MiniLM)
            model = getattr(scoring.of(task), "bertscore_model", None)
            return text_metrics.bertscore(cands, refs, model=model)
        return getattr(text_metrics, name)(cands, refs)

    score.__qualname__ = f"text_metric.{name}"
    return score


for _name in (*OPEN_METRICS, *TEXT_METRICS):
    metric(_name, text=True)(_text_metric(_name))


@dataclass(frozen=True)
class Scoring:
    """The settings scoring may use: the bootstrap's, each task's options as given in params
    (``tasks``: task name -> its block; a task reads its own with :meth:`of`) and the metrics
    stage 06's params list (``metrics``; empty: each task's own)."""

    n_resamples: int = 1000
    seed: int = 0
    tasks: dict = field(default_factory=dict)
    metrics: tuple[str, ...] = ()

    def of(self, task):
        """``task``'s options: its params block over its ``Options`` defaults."""
        return task.options(self.tasks.get(task.name) or {})

    def names(self, task) -> tuple[str, ...]:
        """The metrics ``task`` scores: those of :attr:`metrics` it can score (its own, and any
        text metric where its answers are open), else its own (its options' ``text_metrics`` where
        it has them, else :attr:`lib.tasks.Task.metrics`)."""
        own = tuple(getattr(self.of(task), "text_metrics", task.metrics))
        listed = [m for m in self.metrics if m in own or (task.open_answer and _is_text(m))]
        return tuple(listed) or own


def _is_text(name: str) -> bool:
    return name in METRICS and METRICS[name].text


def score_answers(task, preds: list[Prediction], items: list[Item], scoring: Scoring):
    """Each prediction's ``scores`` (the metrics :meth:`Scoring.names` picks; 0 for an invalid
    answer) and ``correct`` (its :attr:`lib.tasks.Task.correct_if` score, where it has one)."""
    table = {m: METRICS[m].score(preds, items, task, scoring) for m in scoring.names(task)}
    for i, p in enumerate(preds):
        p.scores = {m: (float(v[i]) if p.valid else 0.0) for m, v in table.items()}
        if task.correct_if in p.scores:
            p.correct = bool(p.scores[task.correct_if])


@dataclass
class Tables:
    """What a task's :meth:`Task.aggregate` gives: metric rows (subset, metric, value, CI, n,
    n_invalid) and, for tasks with a protocol of their own, extra frames by name (the tables their
    family declares in ``SCORE_TABLES``, :mod:`lib.tasks.registry`; stage 06 adds the group's
    dataset, style and model and writes each as ``<name>.csv``)."""

    rows: list[dict] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


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

    def __init__(self, task, scoring: Scoring):
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
