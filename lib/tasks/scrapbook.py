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
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lib import plots
from lib.metrics import consistency as S
from lib.schema import ERROR, Item
from lib.tasks.styles import ZeroShot
from lib.tasks.base import Prompt, Results, Scoring, Tables, Task, TaskOptions, metric_row, n_truncated, prompts


# the frame's strings stay Python objects (shared with the records), not copied into pyarrow
# strings: 13 MB less for a 20,000-answer rescore
TEXT_COLUMNS = ("model", "item_id", "image", "parent", "query", "type", "form", "expected", "output")
ITEM_COLUMNS = ("item_id", "image", "parent", "query", "type", "form", "level", "concepts", "subgroup", "absurd",
                "paraphrase", "expected")


def scrapbook_frame(preds, items, spaces: dict | None = None) -> pd.DataFrame:
    """One row per answer, in the shape :func:`lib.metrics.consistency.score_versions` reads.
    Built column by column in one pass over ``items`` (any iterable, such as the lazily read
    :class:`lib.io.ItemsAt`): no item is held once its row is made - a list of row dicts for
    827,004 answers took a gigabyte, and holding the items a quarter of a 20,000-answer rescore."""
    columns: dict[str, list] = {k: [] for k in ITEM_COLUMNS}
    # each row's question kind, and each kind's answer vocabulary: the alternatives its enumerated
    # form lists (union over the items); kinds without an enumerated question use the expected answers
    kinds, seen, seen_kinds = [], defaultdict(set), {}
    # one object per distinct value of a column (labels, queries, concepts), however the items were read
    shared: dict[str, dict] = {k: {} for k in ITEM_COLUMNS}
    for it in items:
        m = it.meta
        for k, v in zip(ITEM_COLUMNS, (it.id, m["image"], m.get("parent"), S.query_id(m["query"]), m["type"], m["form"],
                                       m["level"], tuple(m["concepts"]), m["subgroup"], bool(m["absurd"]),
                                       m.get("paraphrase", 0), it.answer[0])):
            columns[k].append(v if k == "item_id" else shared[k].setdefault(v, v))
        kind = (m["type"], m["query"].get("ask"))
        kinds.append(kind := seen_kinds.setdefault(kind, kind))
        if spaces is None:
            seen[kind].update(m.get("alternatives") or [a for a in it.answer if a != S.UNK])
    spaces = spaces or {k: tuple(sorted(v)) for k, v in seen.items()}
    labels: dict = {}
    columns = {"model": [labels.setdefault((p.model, p.style), f"{p.model} [{p.style}]") for p in preds], **columns,
               "output": [None if p.method == ERROR else p.raw for p in preds], "space": [spaces[k] for k in kinds]}
    return pd.DataFrame({k: pd.Series(v, dtype=object if k in TEXT_COLUMNS else None) for k, v in columns.items()})


@dataclass(frozen=True)
class ScrapbookOptions(TaskOptions):
    """``scrapbook.qa``'s settings: how the condition and enumerated forms are matched - ``paper``
    (the raw answer, case aside, as the paper's protocol) or ``words`` (the lenient reading)."""

    exact: str = "paper"

    def __post_init__(self):
        if self.exact not in S.EXACT_MODES:
            raise ValueError(f"exact={self.exact!r}: choose one of {S.EXACT_MODES}")


class ScrapbookQA(Task):
    name = "scrapbook.qa"
    scene_questions = True
    aggregates_from_state = True  # the scored frame
    Options = ScrapbookOptions
    headline = ("non-absurd", "accuracy_all_forms")  # Table 8: a question is right when all its forms are

    def choices(self, item):
        if item.meta.get("form") == "enumerated" and item.meta.get("alternatives"):
            return tuple(item.meta["alternatives"])
        return None

    def prompt(self, item, root) -> Prompt:
        p = prompts()["scrapbook"]
        return Prompt(p["question"].format(question=item.question), tuple(str(Path(root) / im) for im in item.images),
                      self.choices(item), p["answer_trigger"])

    def score(self, preds, items, scoring: Scoring) -> pd.DataFrame:
        frame = S.score_versions(scrapbook_frame(preds, items), exact=scoring.of(self).exact)
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

    def subset(self, item: Item) -> str:
        return f"form={item.meta['form']}"

    def paper_tables(self, results: Results) -> dict[str, pd.DataFrame]:
        """Scrapbook Table 8 (overall), Tables 9/10/15 (aggregated error types) and Tables 11-14
        (level 2 by position, type and subgroup) from stage 06's errors and levels."""
        out, errors, levels = {}, results.errors, results.levels
        if len(errors):
            q = errors[errors["unit"] == "questions"]
            out["table8_overall"] = q.pivot_table(index=["dataset", "filter"], columns=["model", "style"],
                                                  values="accuracy").round(4)
            agg = errors[errors["unit"] == "aggregated"]
            out["tables9_10_15_errors"] = agg.pivot_table(index=["dataset", "category"],
                                                          columns=["model", "style", "filter"], values="count")
        if len(levels):
            two = levels[(levels["level"] == 2) & (levels["form"] == "all")].copy()
            if len(two):
                two["cell"] = [f"{c} / {n}" for c, n in zip(two["correct"], two["n"])]
                out["tables11_14_level2"] = two.pivot_table(index=["dataset", "model", "style", "concepts", "type"],
                                                            columns="subgroup", values="cell", aggfunc="first")
        return out

    def paper_figures(self, results: Results) -> dict[str, object]:
        """Scrapbook Figures 17-31 (level 1 by concept and form), zero-shot, per dataset and model."""
        levels = results.levels
        if not len(levels):
            return {}
        return {f"scrapbook_level1_{dataset}_{model}": plots.scrapbook_level1(lv)[0]
                for (dataset, model, style), lv in levels.groupby(["dataset", "model", "style"])
                if style == ZeroShot.name and (lv["level"] == 1).any()}

    def sample_unit(self, item: Item):
        return tuple(item.meta.get("unit") or ()), S.query_id(item.meta["query"])

    def sample_rank(self, item: Item) -> float:
        return item.meta["level"]
