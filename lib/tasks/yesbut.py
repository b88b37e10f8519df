"""The YesBut tasks (paper section 5), with the paper's prompts verbatim.

- ``yesbut.detection``: is the two-panel image satirical? Y / N; accuracy, F1 of Y, macro F1.
- ``yesbut.understanding``: ``meta.part`` ``left`` / ``right`` halves get "Describe the image",
  ``whole`` gets "Why is this image funny/satirical?"; text metrics against the annotation, per
  part and per part and stage, with corpus BLEU (``bleu_corpus``, the paper's) beside the mean of
  sentence BLEU (``bleu``), and BERTScore's row naming its model.
- ``yesbut.completion``: the 2x2 grid image, A / B; accuracy.
"""

from __future__ import annotations

from pathlib import Path

from lib.metrics import classification as C
from lib.metrics import text as T
from lib.metrics.stats import bootstrap_ci
from lib.schema import Item
from lib.tasks.base import Prompt, Scoring, Tables, Task, metric_row, n_truncated, prompts, set_text_scores, text_scores


def _images(item: Item, root) -> tuple[str, ...]:
    return tuple(str(Path(root) / im) for im in item.images)


class _OneLabel(Task):
    """A YesBut task answered with one label of a fixed set, asked with the paper's prompt."""

    labels: tuple[str, ...] = ()
    prompt_key = ""  # the prompt and answer-trigger key in the yesbut block

    def choices(self, item):
        return self.labels

    def prompt(self, item, root) -> Prompt:
        p = prompts()["yesbut"]
        return Prompt(p[self.prompt_key], _images(item, root), self.labels, p["answer_trigger"][self.prompt_key])

    def target(self, item):
        return item.answer[0]


class Detection(_OneLabel):
    name = "yesbut.detection"
    labels = ("Y", "N")
    prompt_key = "detection"

    def aggregate(self, preds, items, scoring: Scoring, state=None) -> Tables:
        tables = super().aggregate(preds, items, scoring)
        n, n_inv = len(preds), sum(not p.valid for p in preds)
        gold = [self.target(it) for it in items]
        pred = [p.parsed if p.valid else None for p in preds]
        for metric, labels in (("f1", ["Y"]), ("macro_f1", ["Y", "N"])):
            stat, arrays = C.f1_statistic(gold, pred, labels)
            tables.rows.append(metric_row("all", metric, n=n, n_invalid=n_inv, n_truncated=n_truncated(preds),
                                          ci=bootstrap_ci(stat, arrays, scoring.n_resamples, seed=scoring.seed)))
        return tables


class Completion(_OneLabel):
    name = "yesbut.completion"
    labels = ("A", "B")
    prompt_key = "completion"


class Understanding(Task):
    name = "yesbut.understanding"
    open_answer = True

    def prompt(self, item, root) -> Prompt:
        p = prompts()
        part = item.meta.get("part")
        if part not in ("left", "right", "whole"):
            raise ValueError(f"item {item.id!r}: yesbut.understanding needs meta.part left/right/whole, got {part!r}")
        text = p["yesbut"]["why_funny"] if part == "whole" else p["yesbut"]["describe"]
        return Prompt(text, _images(item, root), None, p["cot"]["answer_trigger"])

    def score(self, preds, items, scoring: Scoring):
        set_text_scores(preds, text_scores(preds, [self.target(it) for it in items], scoring.text_metrics,
                                           scoring.bertscore_model))

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
        rows = []
        refs = [self.target(it) for it in items]
        for subset, idx in self.subsets(items).items():
            n_inv, n_cut = sum(not preds[i].valid for i in idx), n_truncated([preds[i] for i in idx])
            for metric in preds[0].scores:
                vals = [preds[i].scores[metric] for i in idx]
                label = f"bertscore ({bertscore_name(scoring.bertscore_model)})" if metric == "bertscore" else metric
                rows.append(metric_row(subset, label, vals, len(idx), n_inv, n_truncated=n_cut, scoring=scoring))
            if "bleu" in preds[0].scores:
                ci = T.bleu_corpus([preds[i].parsed if preds[i].valid else "" for i in idx], [refs[i] for i in idx],
                                   scoring.n_resamples, scoring.seed)
                rows.append(metric_row(subset, "bleu_corpus", n=len(idx), n_invalid=n_inv, ci=ci, n_truncated=n_cut))
        return Tables(rows)


def bertscore_name(model: str | None) -> str:
    """The BERTScore model as a metrics row names it (the local MiniLM when none is given)."""
    return Path(model).name if model else "all-MiniLM-L6-v2"
