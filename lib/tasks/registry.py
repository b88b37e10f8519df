"""The plug-in registry: what every family of work brings to each stage, found by looking.

A family is a package in ``lib/families/`` (more folders may be put on that package's path, as
``tests/support/families`` is in the tests). Its ``__init__`` declares what it brings, each a
module-level name it may leave out:

    TASKS          task objects (:class:`lib.tasks.Task`): what stage 06 asks and scores
    JUDGES         judge objects (:class:`lib.tasks.judges.Judge`): what rates open answers
    SCORE_TABLES   stage 06's extra tables: name -> the columns the family's scorer fills
                   (written as ``<name>.csv``, e.g. Scrapbook's ``levels`` and ``errors``)
    SPLIT_READERS  files training and stage 03 read as items: suffix -> ``read(path, images)``
    AF_QUESTIONS   the task whose items stage 03's Adversarial Filtering writes (one family's)
    ANALYSIS       stage 07's figures, tables, paper numbers and topic texts
                   (:class:`lib.tasks.analysis.Analysis`)
    HUMAN_LABELS   human-label files ``python -m lib.agreement`` reads: file name -> (task, reader)
    SOURCES        stage 01's kinds of image source: kind -> :class:`lib.tasks.collection.Source`
    MANIFEST_DATASETS  stage 01's datasets from the manifest: ``build(manifest, folder_of, seed)``

The engines (evaluation, training, AF), the metrics, the stores and the backends ask this module,
never a family by name (``tests/test_layers.py`` checks it). Discovery is lazy: a family imports
:mod:`lib.tasks`, so the families are imported the first time something is looked up.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from lib.config import ParamsError, did_you_mean
from lib.tasks.scoring import METRICS

PACKAGE = "lib.families"  # where families are found: each package on its path is one


@dataclass(frozen=True)
class Family:
    """One family's declarations (see the module docstring), read from its package."""

    name: str
    tasks: tuple = ()
    judges: tuple = ()
    score_tables: dict[str, list[str]] = field(default_factory=dict)
    split_readers: dict[str, Callable] = field(default_factory=dict)
    human_labels: dict[str, tuple] = field(default_factory=dict)
    af_questions: object = None
    analysis: object = None
    sources: dict[str, object] = field(default_factory=dict)
    manifest_datasets: tuple = ()

    @classmethod
    def of(cls, name: str, module) -> Family:
        """The declarations of a family's imported package (absent names: it brings none)."""
        return cls(
            name,
            tuple(getattr(module, "TASKS", ())),
            tuple(getattr(module, "JUDGES", ())),
            dict(getattr(module, "SCORE_TABLES", {})),
            dict(getattr(module, "SPLIT_READERS", {})),
            dict(getattr(module, "HUMAN_LABELS", {})),
            getattr(module, "AF_QUESTIONS", None),
            getattr(module, "ANALYSIS", None),
            dict(getattr(module, "SOURCES", {})),
            tuple(getattr(module, "MANIFEST_DATASETS", ())),
        )


class Registry:
    """Every family found, and what they declare by name; two families naming one task, judge,
    table or reader is an error naming both."""

    def __init__(self, families: Iterable[Family]):
        self.families = {f.name: f for f in families}
        self.tasks = self._unique("task", lambda f: ((t.name, t) for t in f.tasks))
        self.judges = self._unique("judge", lambda f: ((j.name, j) for j in f.judges))
        self.score_tables = self._unique("score table", lambda f: f.score_tables.items())
        self.split_readers = self._unique("split reader", lambda f: f.split_readers.items())
        self.human_labels = self._unique("human-label file", lambda f: f.human_labels.items())
        self.sources = self._unique("source kind", lambda f: f.sources.items())
        self.manifest_datasets = tuple(
            b for f in self.families.values() for b in f.manifest_datasets
        )
        declared = [f for f in self.families.values() if f.af_questions is not None]
        if len(declared) > 1:
            names = ", ".join(repr(f.name) for f in declared)
            raise ValueError(f"families {names} each declare AF_QUESTIONS; one family may")
        self.af_questions = declared[0].af_questions if declared else None

    def _unique(self, what: str, entries: Callable) -> dict:
        found, owner = {}, {}
        for family in self.families.values():
            for name, value in entries(family):
                if name in found:
                    raise ValueError(
                        f"family {family.name!r}: {what} {name!r} is already family "
                        f"{owner[name]!r}'s"
                    )
                found[name], owner[name] = value, family.name
        return found


def discover(path: Iterable[str] | None = None) -> Registry:
    """Every family on ``path`` (the families package's path by default), imported in name order."""
    package = importlib.import_module(PACKAGE)
    infos = sorted(pkgutil.iter_modules(package.__path__ if path is None else path), key=_name)
    return Registry(
        Family.of(i.name, importlib.import_module(f"{PACKAGE}.{i.name}")) for i in infos if i.ispkg
    )


def _name(info) -> str:
    return info.name


@cache
def registry() -> Registry:
    """The families found on first use (``registry.cache_clear()`` looks again)."""
    return discover()


def tasks() -> dict:
    """Every task by name."""
    return registry().tasks


def get_task(name: str):
    """The task called ``name``; the error lists the known ones."""
    try:
        return registry().tasks[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(tasks())}") from None


def task_of(item):
    """The task an item belongs to (``item.task``)."""
    try:
        return registry().tasks[item.task]
    except KeyError:
        raise KeyError(
            f"item {item.id!r}: unknown task {item.task!r}; known tasks: {', '.join(tasks())}"
        ) from None


def get_judge(name: str, where: str = "judge"):
    """The judge called ``name``; an unknown one raises :class:`ParamsError` naming ``where``."""
    judges = registry().judges
    if name not in judges:
        raise ParamsError(
            f"{where}: unknown judge {name!r}{did_you_mean(name, judges)} "
            f"(judges: {', '.join(judges) or 'none'})"
        )
    return judges[name]


def task_options(blocks: dict[str, dict], where: str = "tasks") -> dict:
    """Each named task's options from its params block (``tasks: {name: {...}}``); an unknown task,
    key or value raises :class:`lib.config.ParamsError` naming ``where``."""
    known = tasks()
    unknown = [name for name in blocks if name not in known]
    if unknown:
        raise ParamsError(
            f"{where}: unknown task {unknown[0]!r}{did_you_mean(unknown[0], known)} "
            f"(tasks: {', '.join(known)})"
        )
    return {name: known[name].options(block, f"{where}.{name}") for name, block in blocks.items()}


def check_metrics(names, where: str = "metrics") -> None:
    """Raise :class:`ParamsError` naming ``where`` for a name no metric is registered under (the
    families' once they are found: :mod:`lib.tasks.scoring`), with the closest one suggested."""
    registry()
    for name in names:
        if name not in METRICS:
            raise ParamsError(
                f"{where}: unknown metric {name!r}{did_you_mean(name, METRICS)} "
                f"(metrics: {', '.join(sorted(METRICS))})"
            )


def af_questions():
    """The task stage 03's questions are items of (a family's ``AF_QUESTIONS``)."""
    task = registry().af_questions
    if task is None:
        raise LookupError("no family declares AF_QUESTIONS: the task stage 03's questions are of")
    return task


def split_reader(path: Path) -> Callable | None:
    """The family reader of a file of items with ``path``'s suffix (a released split), or None."""
    return registry().split_readers.get(Path(path).suffix)


__all__ = [
    "PACKAGE",
    "Family",
    "Registry",
    "af_questions",
    "check_metrics",
    "discover",
    "get_judge",
    "get_task",
    "registry",
    "split_reader",
    "task_of",
    "task_options",
    "tasks",
]
