"""``vqa.open``: a free answer scored against the references (VQAv2 / DocVQA style): exact match,
ANLS and VQA accuracy per answer; open answers are what the LAVE judge rates."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lib.tasks.task import (
    Prompt,
    Scoring,
    Tables,
    Task,
    TaskOptions,
    cluster_codes,
    metric_row,
    n_truncated,
    set_text_scores,
    style_prompts,
    text_scores,
)

OPEN_METRICS = ("exact_match", "anls", "vqa_accuracy")


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

    def prompt(self, item, root) -> Prompt:
        return Prompt(
            self.prompts()["open"].format(question=item.question),
            tuple(str(Path(root) / im) for im in item.images),
            None,
            style_prompts()["cot"]["answer_trigger"],
        )

    def score(self, preds, items, scoring: Scoring):
        set_text_scores(preds, text_scores(preds, [self.target(it) for it in items], OPEN_METRICS))
        for p in preds:
            p.correct = bool(p.scores["exact_match"])

    def aggregate(self, preds, items, scoring: Scoring, state=None) -> Tables:
        n, n_inv = len(preds), sum(not p.valid for p in preds)
        images = cluster_codes(self, items)
        return Tables(
            [
                metric_row(
                    "all",
                    metric,
                    [p.scores[metric] for p in preds],
                    n,
                    n_inv,
                    scoring=scoring,
                    n_truncated=n_truncated(preds),
                    clusters=images,
                )
                for metric in OPEN_METRICS
            ]
        )
