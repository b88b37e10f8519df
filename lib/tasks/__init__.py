"""What every task is: the :class:`~lib.tasks.task.Task` base class (prompt, scoring, aggregating,
paper tables), its answer :class:`~lib.tasks.task.Reader` and options (:mod:`~lib.tasks.task`), the
metrics registered by name, scorers and metric rows (:mod:`~lib.tasks.scoring`), and the prompt
styles (:mod:`~lib.tasks.styles`: zero-shot, chain of thought).

The tasks themselves live with their family of work in :mod:`lib.families` (``lib/families/<family>/``),
which also finds a task by name (``lib.families.task_of``, ``get_task``, ``TASKS``). Adding a task is a
:class:`Task` subclass in a family's folder, named in its ``TASKS``, with its prompt texts in the
folder's ``prompts.yaml``; its settings are a block under ``tasks:`` in stage 06's params.
"""

from __future__ import annotations

from lib.tasks.clusters import Clusters, cluster_codes
from lib.tasks.scoring import Scorer, Scoring, Tables, metric, metric_row, n_truncated
from lib.tasks.styles import PROMPT_STYLES, STYLES, Style
from lib.tasks.task import (
    Label,
    Prompt,
    Reader,
    Results,
    Task,
    TaskOptions,
    Unit,
    style_prompts,
    user_content,
    wants_question_first,
)

__all__ = [
    "PROMPT_STYLES",
    "STYLES",
    "Clusters",
    "Label",
    "Prompt",
    "Reader",
    "Results",
    "Scorer",
    "Scoring",
    "Style",
    "Tables",
    "Task",
    "TaskOptions",
    "Unit",
    "cluster_codes",
    "metric",
    "metric_row",
    "n_truncated",
    "style_prompts",
    "user_content",
    "wants_question_first",
]
