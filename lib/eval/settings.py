"""What an evaluation asks and how it reads and scores: :class:`EvalConfig`, stage 06's config and
the settings every part of the engine takes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

from lib import config
from lib.io import artifacts
from lib.models import check_spec
from lib.tasks import PROMPT_STYLES, Scoring
from lib.tasks.registry import check_metrics, get_judge, task_options, tasks


@dataclass
class EvalConfig(config.StageConfig):
    """What to evaluate: dataset folders by name, model specs by label, prompt styles, settings."""

    STAGE: ClassVar[str] = artifacts.EVALUATE
    MODEL_ROLES: ClassVar[dict] = {"models": "vlm", "judge": None}

    datasets: dict[str, str] = field(
        default_factory=dict
    )  # name -> folder, or stage:NN_stage/datasets/<name>
    models: dict[str, dict] = field(
        default_factory=lambda: {"base": {"backend": "tiny", "name": "llava"}}
    )  # label -> spec
    demo_data: bool = (
        False  # also evaluate the embedded demo datasets stage 00 wrote (mcq, yesbut, vqa)
    )
    styles: list[str] = field(default_factory=lambda: ["zero_shot", "cot"])
    only_tasks: list[str] = field(
        default_factory=list
    )  # the tasks asked; empty: every task found in the datasets
    # each task's options: {name: {max_new_tokens, judge, and its own (its task's Options)}}
    tasks: dict[str, dict] = field(default_factory=dict)
    # the per-answer metrics scored, by name (lib.tasks.scoring); each task scores those it can
    # (its own; any text metric where answers are open). Empty: each task's own
    metrics: list[str] = field(default_factory=list)
    constrain: bool = (
        True  # constrained decoding over closed answer sets (each backend constrains its own way)
    )
    max_new_tokens: int = 32  # an answer's token limit where its task's options set none
    cot_max_new_tokens: int = 128
    judge: dict | None = (
        None  # the judge model spec (None: nothing judged); it runs each task's tasks.<task>.judge
    )
    judge_max_new_tokens: int = 96
    max_items: int = (
        0  # per dataset (0: all); Scrapbook samples whole images so versions stay together
    )
    n_resamples: int = 1000
    seed: int = 0

    def check(self, source: str) -> None:
        bad = [s for s in self.styles if s not in PROMPT_STYLES]
        if bad:
            raise config.ParamsError(
                f"{source}: styles: unknown style(s) {bad}; choose from {PROMPT_STYLES}"
            )
        if not self.models:
            raise config.ParamsError(f"{source}: models needs at least one label: model spec")
        for kind, names in (("datasets", self.datasets), ("models", self.models)):
            bad = [
                n for n in names if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", n) or ".." in n
            ]
            if bad:  # they name rows, files and figures: plain names only
                raise config.ParamsError(
                    f"{source}: {kind}: {bad[0]!r} is not a plain name (letters, digits, _ . -)"
                )
        for label, spec in self.models.items():
            check_spec(spec, f"{source}: models.{label}")
        check_spec(self.judge, f"{source}: judge", allow_empty=True)
        unknown = [t for t in self.only_tasks if t not in tasks()]
        if unknown:
            raise config.ParamsError(
                f"{source}: only_tasks: unknown task(s) {unknown}; known: {', '.join(tasks())}"
            )
        task_options(self.tasks, f"{source}: tasks")
        check_metrics(self.metrics, f"{source}: metrics")

    @cached_property
    def options(self) -> dict:
        """Every task's options: its block of ``tasks`` over its defaults."""
        return {name: task.options(self.tasks.get(name)) for name, task in tasks().items()}

    def answer_tokens(self, task: str) -> int:
        """The token limit of a task's answer: its options' ``max_new_tokens``, else the stage's."""
        limit = self.options[task].max_new_tokens
        return self.max_new_tokens if limit is None else limit

    def judged_tasks(self) -> dict:
        """The tasks whose answers are judged, each with its judge (``tasks.<task>.judge``, a
        :class:`lib.tasks.judges.Judge`); none without a judge model."""
        if not self.judge:
            return {}
        return {
            name: get_judge(opts.judge, f"tasks.{name}.judge")
            for name, opts in self.options.items()
            if opts.judge
        }

    def hub_ids(self) -> dict[str, str]:
        """Hub ids in the tasks' options (``tasks.<task>.<field>``: id), for the preflight."""
        return {
            **super().hub_ids(),
            **{
                f"tasks.{name}.{f}": getattr(opts, f)
                for name, opts in self.options.items()
                for f in opts.HUB_FIELDS
                if getattr(opts, f)
            },
        }

    def scoring(self) -> Scoring:
        return Scoring(self.n_resamples, self.seed, dict(self.tasks), tuple(self.metrics))
