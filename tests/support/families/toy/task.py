"""``toy.colour``: name the colour of a plain image; scored by accuracy and by a made-up "warm" rate,
a metric of the family's own registered by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lib.tasks import Label, Prompt, Task, TaskOptions, metric

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220)}


@dataclass(frozen=True)
class ColourOptions(TaskOptions):
    warm: str = "red"  # the colour the "warm" rate counts


@metric("warm")
def warm(preds, items, task, scoring):
    """1 where the answer is the colour the task's options call warm."""
    return [float(p.parsed == scoring.of(task).warm) for p in preds]


class Colour(Task):
    name = "toy.colour"
    Options = ColourOptions
    reader = Label()
    metrics = ("accuracy", "warm")

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

    def paper(self, results):
        rows = self.rows(results.metrics)
        return {
            "toy_table1": rows.pivot_table(
                index="model", columns=["metric", "style"], values="value"
            )
        }
