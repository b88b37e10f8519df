"""``vqa.open``: a free answer scored against the references (VQAv2 / DocVQA style): exact match,
ANLS and VQA accuracy per answer; open answers are what the LAVE judge rates."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lib.tasks import Prompt, Task, TaskOptions, style_prompts
from lib.tasks.scoring import OPEN_METRICS


@dataclass(frozen=True)
class OpenOptions(TaskOptions):
    judge: str | None = (
        "lave"  # LAVE rates open answers unless another judge or none (null) is named
    )


class OpenVQA(Task):
    name = "vqa.open"
    open_answer = True
    Options = OpenOptions
    headline = ("all", "vqa_accuracy")
    metrics, correct_if = OPEN_METRICS, "exact_match"

    def prompt(self, item, root) -> Prompt:
        return Prompt(
            self.prompts()["open"].format(question=item.question),
            tuple(str(Path(root) / im) for im in item.images),
            None,
            style_prompts()["cot"]["answer_trigger"],
        )
