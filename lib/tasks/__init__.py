"""Tasks as objects: one module per family, a plain dict from ``Item.task`` to its task.

    from lib.tasks import task_of
    task = task_of(item)
    request = task.request(item, root, question_first=True)
    answer, method, valid = task.read_response(item, response)

Families: :mod:`~lib.tasks.mcq` (MemeQA multiple choice), :mod:`~lib.tasks.yesbut` (detection,
understanding, completion), :mod:`~lib.tasks.scrapbook` (the Scrapbook protocol),
:mod:`~lib.tasks.vqa_open` (free answers against references). Adding a task is one module with a
:class:`~lib.tasks.base.Task` subclass, one prompt block in ``lib/data/prompts/tasks.yaml`` and one
entry in :data:`TASKS`.
"""

from __future__ import annotations

from lib.schema import Item
from lib.tasks.base import (PROMPT_STYLES, Prompt, Scoring, Tables, Task, metric_row, n_truncated, prompts, user_content,
                            wants_question_first)
from lib.tasks.mcq import MultipleChoice
from lib.tasks.scrapbook import ScrapbookQA
from lib.tasks.vqa_open import OpenVQA
from lib.tasks.yesbut import Completion, Detection, Understanding

TASKS: dict[str, Task] = {t.name: t for t in (MultipleChoice(), Detection(), Understanding(), Completion(),
                                              ScrapbookQA(), OpenVQA())}


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
        raise KeyError(f"item {item.id!r}: unknown task {item.task!r}; known tasks: {', '.join(TASKS)}") from None


__all__ = ["PROMPT_STYLES", "TASKS", "Prompt", "Scoring", "Tables", "Task", "get_task", "metric_row", "n_truncated", "prompts",
           "task_of", "user_content", "wants_question_first"]
