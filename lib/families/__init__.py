"""Families of work: one folder per paper and one for plain VQA, each holding what is its own.

    lib/families/memeqa/     MemeQA: the multiple-choice task, its importer (JSON splits), prompts
    lib/families/yesbut/     YesBut: detection / understanding / completion, two-panel images, prompts
    lib/families/scrapbook/  Scrapbook: the generator (stage 04), the task, the consistency protocol,
                             the paper's counts, templates and vocabulary (data/), prompts
    lib/families/lave/       LAVE: the judge (rating 1-3 against references), its prompt and shots
    lib/families/vqa/        open VQA: free answers against references, prompts

A family is a package here whose ``__init__`` names its tasks in ``TASKS`` (task objects; a family
without one, like LAVE, names none). Families are found by looking (:func:`discover`), not from a
list: adding one is one new folder (``tests/test_toy_task.py`` adds ``tests/support/families/toy``
this way). A task's prompt texts are the ``prompts.yaml`` beside the module defining it
(:meth:`lib.tasks.Task.prompts`), its settings one block under ``tasks:`` in stage 06's params.

    from lib.families import task_of
    task = task_of(item)

What every task is (the :class:`~lib.tasks.Task` base, prompt styles) is :mod:`lib.tasks`; the
stages and the evaluation engine find a task here, by name.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

from lib.config import ParamsError, did_you_mean
from lib.schema import Item
from lib.tasks import Task, TaskOptions


def discover(path: Iterable[str] | None = None) -> dict[str, Task]:
    """Every family's tasks by name: each package in ``path`` (this folder by default) imported, in
    name order, and its ``TASKS`` read. Two families naming the same task is an error."""
    found: dict[str, Task] = {}
    for info in sorted(
        pkgutil.iter_modules(__path__ if path is None else path), key=lambda i: i.name
    ):
        if not info.ispkg:
            continue
        family = importlib.import_module(f"{__name__}.{info.name}")
        for task in getattr(family, "TASKS", ()):
            if task.name in found:
                raise ValueError(
                    f"family {info.name!r}: task {task.name!r} is already {found[task.name]!r}"
                )
            found[task.name] = task
    return found


TASKS: dict[str, Task] = discover()


def human_label_readers(path: Iterable[str] | None = None) -> dict[str, tuple[str, object]]:
    """Human-label files the families can read (``HUMAN_LABELS`` in a family's ``__init__``: a
    release's file name -> (the task its answers are of, a reader returning
    :data:`lib.agreement.LABEL_COLUMNS` rows)), so ``python -m lib.agreement`` names no paper."""
    found: dict[str, tuple[str, object]] = {}
    for info in sorted(
        pkgutil.iter_modules(__path__ if path is None else path), key=lambda i: i.name
    ):
        if info.ispkg:
            found.update(
                getattr(importlib.import_module(f"{__name__}.{info.name}"), "HUMAN_LABELS", {})
            )
    return found


def get_task(name: str) -> Task:
    """The task called ``name``; the error lists the known ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}") from None


def task_of(item: Item) -> Task:
    """The task an item belongs to (``item.task``)."""
    try:
        return TASKS[item.task]
    except KeyError:
        raise KeyError(
            f"item {item.id!r}: unknown task {item.task!r}; known tasks: {', '.join(TASKS)}"
        ) from None


def task_options(blocks: dict[str, dict], where: str = "tasks") -> dict[str, TaskOptions]:
    """Each named task's options from its params block (``tasks: {name: {...}}``); an unknown task,
    key or value raises :class:`lib.config.ParamsError` naming ``where``."""
    unknown = [name for name in blocks if name not in TASKS]
    if unknown:
        raise ParamsError(
            f"{where}: unknown task {unknown[0]!r}{did_you_mean(unknown[0], TASKS)} "
            f"(tasks: {', '.join(TASKS)})"
        )
    return {name: TASKS[name].options(block, f"{where}.{name}") for name, block in blocks.items()}


__all__ = ["TASKS", "discover", "get_task", "human_label_readers", "task_of", "task_options"]
