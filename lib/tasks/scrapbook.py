"""``scrapbook.qa``: a Scrapbook question as generated (its form is in its text), scored by the
paper's protocol (:mod:`lib.metrics.consistency`): matching per form, error categories,
consistency over versions, precedence over ancestor images, level gating.

The closed answer set is the enumerated form's listed alternatives (constrained decoding may use
it); the other forms are asked and read as free text, as in the paper. Scoring always reads the
model's *raw* output - never an answer parsed out of it - so "Yes, there is a circle." is not
"yes" under the exact forms. Items are sampled by query (one query on one image chain, every
paraphrase and version), lowest levels first.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pandas as pd

from lib.metrics import consistency as S
from lib.schema import ERROR, Item
from lib.tasks.base import Prompt, Scoring, Tables, Task, metric_row, n_truncated, prompts


def answer_spaces(items: list[Item]) -> dict:
    """Each question kind's answer vocabulary: the alternatives its enumerated form lists (union
    over the items); kinds without an enumerated question use the expected answers seen."""
    spaces: dict = defaultdict(set)
    for it in items:
        kind = (it.meta["type"], it.meta["query"].get("ask"))
        spaces[kind].update(it.meta.get("alternatives") or [a for a in it.answer if a != S.UNK])
    return {k: tuple(sorted(v)) for k, v in spaces.items()}


def scrapbook_frame(preds, items: list[Item], spaces: dict | None = None) -> pd.DataFrame:
    """One row per answer, in the shape :func:`lib.metrics.consistency.score_versions` reads
    (built column by column: a list of row dicts for 827,004 answers took a gigabyte)."""
    spaces = spaces or answer_spaces(items)
    metas = [it.meta for it in items]
    labels: dict = {}
    return pd.DataFrame({
        "model": [labels.setdefault((p.model, p.style), f"{p.model} [{p.style}]") for p in preds],
        "item_id": [it.id for it in items],
        "image": [m["image"] for m in metas],
        "parent": [m.get("parent") for m in metas],
        "query": [S.query_id(m["query"]) for m in metas],
        "type": [m["type"] for m in metas],
        "form": [m["form"] for m in metas],
        "level": [m["level"] for m in metas],
        "concepts": [tuple(m["concepts"]) for m in metas],
        "subgroup": [m["subgroup"] for m in metas],
        "absurd": [bool(m["absurd"]) for m in metas],
        "paraphrase": [m.get("paraphrase", 0) for m in metas],
        "expected": [it.answer[0] for it in items],
        "output": [None if p.method == ERROR else p.raw for p in preds],
        "space": [spaces[(m["type"], m["query"].get("ask"))] for m in metas],
    })


class ScrapbookQA(Task):
    name = "scrapbook.qa"
    scene_questions = True

    def choices(self, item):
        if item.meta.get("form") == "enumerated" and item.meta.get("alternatives"):
            return tuple(item.meta["alternatives"])
        return None

    def prompt(self, item, root) -> Prompt:
        p = prompts()["scrapbook"]
        return Prompt(p["question"].format(question=item.question), tuple(str(Path(root) / im) for im in item.images),
                      self.choices(item), p["answer_trigger"])

    def score(self, preds, items, scoring: Scoring) -> pd.DataFrame:
        frame = S.score_versions(scrapbook_frame(preds, items), exact=scoring.scrapbook_exact)
        for p, cat, ok, strict in zip(preds, frame["category"], frame["correct"], frame["correct_strict"]):
            p.correct = bool(ok)
            p.scores = {"correct": float(ok), "correct_strict": float(strict)}
            p.meta["category"] = cat
        return frame

    def aggregate(self, preds, items, scoring: Scoring, state=None) -> Tables:
        frame = state if state is not None else self.score(preds, items, scoring)
        n_inv = sum(not p.valid for p in preds)
        qs = S.questions(frame)
        rows = []
        for form, sub in frame.groupby("form"):
            in_form = [preds[i] for i in sub.index]
            rows.append(metric_row(f"form={form}", "accuracy", sub["correct"].astype(float).tolist(), len(sub),
                                   int(sum(not p.valid for p in in_form)), scoring=scoring, n_truncated=n_truncated(in_form)))
        for filt, q in (("non-absurd", qs[~qs["absurd"]]), ("full", qs)):
            for metric, col in (("accuracy_all_forms", "correct_all"), ("accuracy_all_forms_strict", "correct_all_strict"),
                                ("consistent_rate", "consistent")):
                rows.append(metric_row(filt, metric, q[col].astype(float).tolist(), len(q), n_inv, scoring=scoring,
                                       n_truncated=n_truncated(preds)))
        overall = S.overall_table(frame, qs)
        errors = pd.concat([S.error_table(frame, qs), overall.rename(columns={"questions": "count"}).assign(
            unit="questions", category="overall")], ignore_index=True)
        return Tables(rows, levels=S.levels(frame), errors=errors)

    def sample_unit(self, item: Item):
        return tuple(item.meta.get("unit") or ()), S.query_id(item.meta["query"])

    def sample_rank(self, item: Item) -> float:
        return item.meta["level"]
