"""``toy.colour``: name the colour of a plain image; scored by accuracy and by a made-up "warm" rate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lib.tasks import Prompt, Tables, Task, TaskOptions, metric_row

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220)}


@dataclass(frozen=True)
class ColourOptions(TaskOptions):
    warm: str = "red"  # the colour the "warm" rate counts


class Colour(Task):
    name = "toy.colour"
    Options = ColourOptions

    @classmethod
    def make_item(cls, id, image, colour):
        return super().make_item(
            id, [image], "Answer with one word.", [colour], meta={"type": "colour"}
        )

    def choices(self, item):
        return tuple(COLOURS)

    def prompt(self, item, root):
        p = self.prompts()
        return Prompt(
            p["question"].format(question=item.question),
            tuple(str(Path(root) / im) for im in item.images),  # an absolute path stays itself
            self.choices(item),
            p["answer_trigger"],
        )

    def target(self, item):
        return item.answer[0]

    def score(self, preds, items, scoring):
        for p, it in zip(preds, items):
            p.correct = p.valid and p.parsed == it.answer[0]
            p.scores = {
                "accuracy": float(p.correct),
                "warm": float(p.parsed == scoring.of(self).warm),
            }

    def aggregate(self, preds, items, scoring, state=None):
        n, n_inv = len(preds), sum(not p.valid for p in preds)
        return Tables(
            [
                metric_row("all", m, [p.scores[m] for p in preds], n, n_inv, scoring=scoring)
                for m in ("accuracy", "warm")
            ]
        )

    def paper_tables(self, results):
        rows = self.rows(results.metrics)
        return {
            "toy_table1": rows.pivot_table(
                index="model", columns=["metric", "style"], values="value"
            )
        }
