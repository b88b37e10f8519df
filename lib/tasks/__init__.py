"""Tasks as objects: one module per family, a plain dict from ``Item.task`` to its task.

    from lib.tasks import task_of
    task = task_of(item)
    request = task.request(item, root, question_first=True, max_new_tokens=32)
    answer, method, valid = task.read_response(item, response)

Families: :mod:`~lib.tasks.mcq` (MemeQA multiple choice), :mod:`~lib.tasks.yesbut` (detection,
understanding, completion), :mod:`~lib.tasks.scrapbook` (the Scrapbook protocol),
:mod:`~lib.tasks.vqa_open` (free answers against references). Adding a task is one module with a
:class:`~lib.tasks.base.Task` subclass (its items, options, prompt, reading, scoring, metric rows
and paper tables), one prompt block in ``lib/data/prompts/tasks.yaml`` and one entry in
:data:`TASKS`; its settings are a block under ``tasks:`` in stage 06's params. Prompt styles
(zero-shot, chain of thought) are :mod:`~lib.tasks.styles` objects.
"""

from __future__ import annotations

from lib.config import ParamsError, did_you_mean
from lib.schema import Item
from lib.tasks.base import (Prompt, Results, Scorer, Scoring, Tables, Task, TaskOptions, metric_row, n_truncated, prompts,
                            user_content, wants_question_first)
from lib.tasks.mcq import MultipleChoice
from lib.tasks.scrapbook import ScrapbookQA
from lib.tasks.vqa_open import OpenVQA
from lib.tasks.styles import PROMPT_STYLES, STYLES, Style
from lib.tasks.yesbut import Completion, Detection, Understanding

TASKS: dict[str, Task] = {t.name: t for t in (MultipleChoice(), Detection(), Understanding(), Completion(),
                                              ScrapbookQA(), OpenVQA())}


def get_task(name: str) -> Task:
    """The task called ``name``; the error lists the known ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}") from None


def task_options(blocks: dict[str, dict], where: str = "tasks") -> dict[str, TaskOptions]:
    """Each named task's options from its params block (``tasks: {name: {...}}``); an unknown task,
    key or value raises :class:`lib.config.ParamsError` naming ``where``."""
    unknown = [name for name in blocks if name not in TASKS]
    if unknown:
        raise ParamsError(f"{where}: unknown task {unknown[0]!r}{did_you_mean(unknown[0], TASKS)} "
                          f"(tasks: {', '.join(TASKS)})")
    return {name: TASKS[name].options(block, f"{where}.{name}") for name, block in blocks.items()}


def default_task(has_options: bool) -> str:
    """The task of an imported row that names none: multiple choice with options, open VQA without."""
    return MultipleChoice.name if has_options else OpenVQA.name


def task_of(item: Item) -> Task:
    """The task an item belongs to (``item.task``)."""
    try:
        return TASKS[item.task]
    except KeyError:
        raise KeyError(f"item {item.id!r}: unknown task {item.task!r}; known tasks: {', '.join(TASKS)}") from None


__all__ = ["PROMPT_STYLES", "STYLES", "TASKS", "Prompt", "Results", "Scorer", "Scoring", "Style", "Tables", "Task", "TaskOptions",
           "default_task", "get_task", "metric_row", "n_truncated", "prompts", "task_of", "task_options", "user_content",
           "wants_question_first"]
