"""The YesBut tasks (paper section 5), with the paper's prompts verbatim.

- ``yesbut.detection``: is the two-panel image satirical? Y / N; accuracy, F1 of Y, macro F1.
- ``yesbut.understanding``: ``meta.part`` ``left`` / ``right`` halves get "Describe the image",
  ``whole`` gets "Why is this image funny/satirical?"; text metrics against the annotation, per
  part and per part and stage, with corpus BLEU (``bleu_corpus``, the paper's) beside the mean of
  sentence BLEU (``bleu``), and BERTScore's row naming its model.
- ``yesbut.completion``: the 2x2 grid image, A / B; accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pandas as pd

from lib.core.schema import Item
from lib.families.yesbut import figures
from lib.metrics import classification
from lib.metrics import text as text_metrics
from lib.metrics.stats import bootstrap_ci
from lib.tasks import (
    Label,
    Prompt,
    Results,
    Scoring,
    Tables,
    Task,
    TaskOptions,
    cluster_codes,
    metric_row,
    n_truncated,
    style_prompts,
)
from lib.tasks.scoring import TEXT_METRICS


def _images(item: Item, root) -> tuple[str, ...]:
    return tuple(str(Path(root) / im) for im in item.images)


class _OneLabel(Task):
    """A YesBut task answered with one label of a fixed set, asked with the paper's prompt; its paper
    table (``table``) holds ``table_metrics`` zero-shot vs CoT with their 95% intervals."""

    labels: tuple[str, ...] = ()
    prompt_key = ""  # the prompt and answer-trigger key in the yesbut block
    table = ""
    table_metrics: tuple[str, ...] = ("accuracy",)
    reader = Label()

    def paper(self, results: Results) -> dict[str, pd.DataFrame]:
        m = self.rows(results.metrics)
        m = m[m["metric"].isin(self.table_metrics) & (m["subset"] == "all")].copy()
        if m.empty:
            return {}
        m["cell"] = [
            f"{v:.3f} [{lo:.2f}, {hi:.2f}]"
            for v, lo, hi in zip(m["value"], m["ci_low"], m["ci_high"])
        ]
        return {
            self.table: m.pivot_table(
                index="model", columns=["metric", "style"], values="cell", aggfunc="first"
            )
        }

    def choices(self, item):
        return self.labels

    def prompt(self, item, root) -> Prompt:
        p = self.prompts()
        return Prompt(
            p[self.prompt_key],
            _images(item, root),
            self.labels,
            p["answer_trigger"][self.prompt_key],
        )


class Detection(_OneLabel):
    name = "yesbut.detection"
    labels = ("Y", "N")
    prompt_key = "detection"
    table, table_metrics = "table3_detection", ("accuracy", "f1")  # YesBut Table 3

    @classmethod
    def make_item(cls, id: str, image: str, satirical: bool, meta: dict | None = None) -> Item:
        """Is the two-panel ``image`` satirical? Answered Y / N."""
        return super().make_item(id, [image], answer=["Y" if satirical else "N"], meta=meta)

    def aggregate(self, preds, items, scoring: Scoring, state=None) -> Tables:
        tables = super().aggregate(preds, items, scoring)
        n, n_inv = len(preds), sum(not p.valid for p in preds)
        gold = [self.reader.target(it) for it in items]
        pred = [p.parsed if p.valid else None for p in preds]
        for metric, labels in (("f1", ["Y"]), ("macro_f1", ["Y", "N"])):
            stat, arrays = classification.f1_statistic(gold, pred, labels)
            images = cluster_codes(self, items)
            tables.rows.append(
                metric_row(
                    "all",
                    metric,
                    n=n,
                    n_invalid=n_inv,
                    n_truncated=n_truncated(preds),
                    ci=bootstrap_ci(
                        stat, arrays, scoring.n_resamples, seed=scoring.seed, clusters=images
                    ),
                    clusters=images,
                )
            )
        return tables


class Completion(_OneLabel):
    name = "yesbut.completion"
    labels = ("A", "B")
    prompt_key = "completion"
    table = "table4_completion"  # YesBut Table 4

    @classmethod
    def make_item(cls, id: str, image: str, correct: int, meta: dict | None = None) -> Item:
        """The 2x2 grid ``image`` whose option ``correct`` (0: A, 1: B) completes the satire."""
        return super().make_item(id, [image], answer=[cls.labels[correct]], meta=meta)


@dataclass(frozen=True)
class UnderstandingOptions(TaskOptions):
    """``yesbut.understanding``'s settings: the text metrics it reports and BERTScore's model."""

    HUB_FIELDS: ClassVar[tuple] = ("bertscore_model",)

    text_metrics: tuple[str, ...] = TEXT_METRICS
    bertscore_model: str | None = None  # HF id or path; None: the local MiniLM

    def __post_init__(self):
        object.__setattr__(self, "text_metrics", tuple(self.text_metrics))
        bad = [m for m in self.text_metrics if m not in TEXT_METRICS]
        if bad:
            raise ValueError(f"text_metrics: unknown metric(s) {bad}; choose from {TEXT_METRICS}")


PARTS = ("left", "right", "whole")  # a half described, or the whole image explained
UNDERSTANDING_METRICS = ("bleu_corpus", "rouge_l", "meteor", "bertscore")  # the paper's four (5.3)


class Understanding(Task):
    name = "yesbut.understanding"
    open_answer = True
    Options = UnderstandingOptions
    headline = ("all", "rouge_l")
    metrics, correct_if = TEXT_METRICS, None  # its options' text_metrics choose among them

    @classmethod
    def make_item(cls, id: str, image: str, reference: str, meta: dict) -> Item:
        """Describe a half (``meta`` ``part`` left / right) or say why the whole image is funny
        (``whole``); scored against the annotation ``reference``."""
        if meta.get("part") not in PARTS:
            raise ValueError(f"item {id!r}: part must be one of {PARTS}, got {meta.get('part')!r}")
        return super().make_item(id, [image], answer=[reference], meta=meta)

    def prompt(self, item, root) -> Prompt:
        p = self.prompts()
        part = item.meta.get("part")
        if part not in PARTS:
            raise ValueError(
                f"item {item.id!r}: {self.name} needs meta.part left/right/whole, got {part!r}"
            )
        text = p["why_funny"] if part == "whole" else p["describe"]
        return Prompt(text, _images(item, root), None, style_prompts()["cot"]["answer_trigger"])

    def subsets(self, items) -> dict[str, list[int]]:
        """``all``, each part, each part within each stage (Figure 5, Table 6), and the whole image
        by annotated difficulty (Table 7) and by text in the image (Table 8)."""
        subsets = {"all": list(range(len(items)))}
        for i, it in enumerate(items):
            part = it.meta.get("part", "all")
            subsets.setdefault(part, []).append(i)
            if it.meta.get("stage") is not None:
                subsets.setdefault(f"{part}/stage {it.meta['stage']}", []).append(i)
            if part == "whole":
                for key in ("difficulty", "text"):
                    if it.meta.get(key) is not None:
                        subsets.setdefault(f"whole/{key} {it.meta[key]}", []).append(i)
        return subsets

    def aggregate(self, preds, items, scoring: Scoring, state=None) -> Tables:
        """Per subset, the mean of each per-answer metric (BERTScore's row names its model) and,
        beside sentence BLEU's mean, corpus BLEU - what the paper's tool reports."""
        rows, model = [], scoring.of(self).bertscore_model
        refs = [self.reader.target(it) for it in items]
        images = cluster_codes(self, items)
        for subset, idx in self.subsets(items).items():
            n_inv, n_cut = (
                sum(not preds[i].valid for i in idx),
                n_truncated([preds[i] for i in idx]),
            )
            for metric in preds[0].scores:
                vals = [preds[i].scores[metric] for i in idx]
                label = f"bertscore ({bertscore_name(model)})" if metric == "bertscore" else metric
                rows.append(
                    metric_row(
                        subset,
                        label,
                        vals,
                        len(idx),
                        n_inv,
                        n_truncated=n_cut,
                        scoring=scoring,
                        clusters=images[idx],
                    )
                )
            if "bleu" in preds[0].scores:
                ci = text_metrics.bleu_corpus(
                    [preds[i].parsed if preds[i].valid else "" for i in idx],
                    [refs[i] for i in idx],
                    scoring.n_resamples,
                    scoring.seed,
                    clusters=images[idx],
                )
                rows.append(
                    metric_row(
                        subset,
                        "bleu_corpus",
                        n=len(idx),
                        n_invalid=n_inv,
                        ci=ci,
                        n_truncated=n_cut,
                        clusters=images[idx],
                    )
                )
        return Tables(rows)

    def subset(self, item: Item) -> str:
        return item.meta["part"]

    def cluster(self, item: Item) -> str:
        """The two-panel image a description is of, whole or one half (its id less the part), or
        the stage-2 original a restyled image redraws: their descriptions share one joke."""
        part = item.meta.get("part")
        return item.meta.get("original") or (item.id.removesuffix(f"-{part}") if part else item.id)

    def frame(self, metrics: pd.DataFrame, style: str = "zero_shot") -> pd.DataFrame:
        """The understanding rows as the paper reads them (zero-shot, its four metrics): model,
        subset, part (whole = the WHYFUNNY prompt, left/right = "Describe the image"), group (stage
        2, 3, 4, all; or difficulty / text), metric, value - plus ``mean of 4`` per model and subset."""
        m = self.rows(metrics)
        m = m[m["style"] == style].copy()
        m["metric"] = m["metric"].str.replace(
            r"^bertscore.*", "bertscore", regex=True
        )  # its row names the model
        m = m[m["metric"].isin(UNDERSTANDING_METRICS) & (m["subset"] != "all")]
        if m.empty:
            return m
        m["part"] = m["subset"].str.split("/").str[0]
        m["group"] = m["subset"].str.split("/").str[1].fillna("all")
        mean = (
            m.groupby(["model", "subset", "part", "group"], as_index=False)["value"]
            .mean()
            .assign(metric="mean of 4")
        )
        return pd.concat(
            [m[["model", "subset", "part", "group", "metric", "value"]], mean], ignore_index=True
        )

    def paper(self, results: Results) -> dict[str, object]:
        """YesBut Tables 6 (by annotation stage, both prompts), 7 (WHYFUNNY by difficulty) and 8
        (WHYFUNNY by text in the image): one row per model and group, a column per metric and their
        mean; and Figure 5 (the metrics by part and stage)."""
        f = self.frame(results.metrics)
        if f.empty:
            return {}
        stages = f[f["group"].str.startswith("stage") | (f["group"] == "all")]
        stages = stages.assign(
            prompt=stages["part"].map(
                {"whole": "WHYFUNNY", "left": "describe (left)", "right": "describe (right)"}
            )
        )
        out = {
            "yesbut_fig5_understanding": figures.understanding_metrics(f)[0],
            "table6_understanding_by_stage": stages.pivot_table(
                index=["model", "prompt", "group"], columns="metric", values="value"
            ).round(4),
        }
        for name, key in (
            ("table7_understanding_by_difficulty", "difficulty"),
            ("table8_understanding_by_text", "text"),
        ):
            sub = f[(f["part"] == "whole") & f["group"].str.startswith(key)]
            if len(sub):
                out[name] = (
                    sub.assign(group=sub["group"].str.removeprefix(f"{key} "))
                    .rename(columns={"group": key})
                    .pivot_table(index=["model", key], columns="metric", values="value")
                    .round(4)
                )
        return out


def bertscore_name(model: str | None) -> str:
    """The BERTScore model as a metrics row names it (the local MiniLM when none is given)."""
    return Path(model).name if model else "all-MiniLM-L6-v2"
