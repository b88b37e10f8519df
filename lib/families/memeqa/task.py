"""``mcq``: MemeQA-style multiple choice, 2-26 options lettered A, B, ...

Single answer: one letter. Multi-answer (``meta.general_type == "multi"``): letters separated by
commas, ``N`` when no option is correct (unless the options hold a "None of the above", which is
then an ordinary option). Scores: ``exact`` (the same set of options) and ``jaccard`` (partial
credit), each as a micro average, MemeQA's macro average over question types, and per type.
"""

from __future__ import annotations

import itertools
import re
import string
from pathlib import Path

import pandas as pd

from lib.core.schema import INVALID, Item
from lib.families.memeqa import figures
from lib.metrics import classification
from lib.metrics.stats import bootstrap_ci
from lib.tasks import (
    Prompt,
    Reader,
    Results,
    Scoring,
    Tables,
    Task,
    cluster_codes,
    metric,
    metric_row,
    n_truncated,
)

LETTERS = string.ascii_uppercase
NONE_LETTER = "N"
_NONE_OPTION = re.compile(r"^\s*none of the (above|options)\s*\.?\s*$", re.IGNORECASE)


def is_multi(item: Item) -> bool:
    return item.meta.get("general_type") == "multi"


def has_none_option(item: Item) -> bool:
    return any(_NONE_OPTION.match(o) for o in item.options or ())


def letters(n: int) -> tuple[str, ...]:
    if not 2 <= n <= len(LETTERS):
        raise ValueError(f"a multiple-choice item needs 2-26 options, got {n}")
    return tuple(LETTERS[:n])


def letter_sets(n: int, with_none: bool) -> tuple[str, ...]:
    """Every answer of a multi-answer item as text: "A", "A, B", ... and "N" (none) when allowed."""
    ls = letters(n)
    sets = [", ".join(c) for k in range(1, n + 1) for c in itertools.combinations(ls, k)]
    return tuple(sets + ([NONE_LETTER] if with_none else []))


_PREFIX = re.compile(
    r"^\s*(?:the\s+)?(?:correct\s+)?(?:answers?|options?)\s*(?:are|is)?\s*[:\-]?\s*", re.IGNORECASE
)
_SEPARATOR = re.compile(r"\s*(?:,|;|&|\band\b|\s)\s*", re.IGNORECASE)


def parse_letter_set(text: str, n: int, with_none: bool) -> frozenset[int] | None:
    """Option indices named by a multi-answer reply ("A, C", "B and D", "ACD", "(A) (C)", "N"), or
    None when the text is anything else (prose such as "a cat", letters beyond the options, "N"
    mixed with letters). Single letters may be lower case ("b and d"); runs must be capitals."""
    t = _PREFIX.sub("", text.strip().rstrip(".").strip(), count=1).strip()
    if with_none and t.upper() in (NONE_LETTER, "NONE"):
        return frozenset()
    tokens = [tok.strip("()") for tok in _SEPARATOR.split(t) if tok.strip("()")]
    if not tokens or not all(re.fullmatch(r"[A-Z]+|[A-Za-z]", tok) for tok in tokens):
        return (
            None  # a run of letters must be capitals ("ACD"), so a word ("cat") is not a letter set
        )
    tokens = [tok.upper() for tok in tokens]
    idx = {LETTERS.index(ch) for tok in tokens for ch in tok}
    if any(i >= n for i in idx) or (
        NONE_LETTER in "".join(tokens) and n <= LETTERS.index(NONE_LETTER)
    ):
        return None
    return frozenset(idx)


def format_options(options: list[str]) -> str:
    return "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))


class Letters(Reader):
    """A single answer's letter, or a multi-answer item's set of option indices (read from "A, C",
    "N"...; stored as sorted indices, shown as letters)."""

    def target(self, item: Item):
        """A letter (single answer) or a frozenset of option indices (multi-answer)."""
        return frozenset(item.answer) if is_multi(item) else LETTERS[item.answer[0]]

    def target_text(self, item: Item) -> str:
        if is_multi(item):
            return (
                ", ".join(LETTERS[i] for i in sorted(item.answer)) if item.answer else NONE_LETTER
            )
        return LETTERS[item.answer[0]]

    def answer_text(self, item: Item, stored) -> str:
        """A multi-answer item's stored option indices as letters ("A, C"; "N": none of them)."""
        if is_multi(item) and isinstance(stored, list):
            return ", ".join(LETTERS[i] for i in stored) or NONE_LETTER
        return super().answer_text(item, stored)

    def read(self, item: Item, text: str, choices, constrained_value=None) -> tuple:
        if not is_multi(item):
            return super().read(item, text, choices, constrained_value)
        value = parse_letter_set(
            constrained_value if constrained_value is not None else text,
            len(item.options),
            not has_none_option(item),
        )
        return (value, "parse:letters") if value is not None else (None, INVALID)


def _chosen(p, item: Item) -> set | None:
    if p.parsed is None:
        return None
    return set(p.parsed) if is_multi(item) else {LETTERS.index(p.parsed)}


@metric("exact")
def exact(preds, items, task, scoring) -> list[float]:
    """1 where the chosen options are the gold ones, all of them."""
    chosen = [_chosen(p, it) for p, it in zip(preds, items)]
    return [float(c is not None and c == set(it.answer)) for c, it in zip(chosen, items)]


@metric("jaccard")
def jaccard(preds, items, task, scoring) -> list[float]:
    """Partial credit: the chosen and gold options' intersection over their union."""
    return [classification.jaccard(set(it.answer), _chosen(p, it)) for p, it in zip(preds, items)]


class MultipleChoice(Task):
    name = "mcq"
    validation_metric = "macro"  # MemeQA selects by the dev macro average over its question types
    headline = (
        "all",
        "exact_macro",
    )  # MemeQA's main results: the macro average over question types
    headline_score = "exact"  # the macro average's per-answer part
    reader = Letters()
    metrics, correct_if = ("exact", "jaccard"), "exact"

    @classmethod
    def make_item(
        cls,
        id: str,
        images: list[str],
        question: str = "",
        answer: list | tuple = (),
        options: list[str] | None = None,
        general_type: str | None = None,
        specific_type: str | None = None,
        meta: dict | None = None,
    ) -> Item:
        """A multiple-choice item: ``answer`` holds option indices; ``general_type`` (single / multi)
        defaults to what the number of answers says, ``specific_type`` is the question type the
        macro average runs over."""
        kinds = {"general_type": general_type or ("single" if len(answer) == 1 else "multi")}
        if specific_type is not None:
            kinds["specific_type"] = specific_type
        return super().make_item(id, images, question, answer, options, {**kinds, **(meta or {})})

    def choices(self, item: Item) -> tuple[str, ...]:
        if not item.options:
            raise ValueError(f"item {item.id!r}: an mcq item needs options")
        n = len(item.options)
        return letter_sets(n, not has_none_option(item)) if is_multi(item) else letters(n)

    def prompt(self, item: Item, root) -> Prompt:
        p = self.prompts()
        images = tuple(str(Path(root) / im) for im in item.images)
        choices = self.choices(item)
        opts = format_options(item.options)
        if is_multi(item):
            none = "" if has_none_option(item) else p["none_clause"]
            text = p["multi"].format(question=item.question, options=opts, none_clause=none)
            return Prompt(
                text, images, choices, p["answer_trigger"]["multi"].format(none_clause=none)
            )
        text = p["single"].format(question=item.question, options=opts)
        return Prompt(text, images, choices, p["answer_trigger"]["single"].format(last=choices[-1]))

    def subset(self, item: Item) -> str:
        return item.meta.get("specific_type", "all")

    def facets(self, item: Item) -> dict:
        """The question type (``specific_type``), which MemeQA's macro average runs over."""
        kind = item.meta.get("specific_type")
        return {"type": kind} if kind else {}

    def paper(self, results: Results) -> dict[str, object]:
        """MemeQA's per-type table (the paper's main results) per multiple-choice dataset,
        ``memeqa_types_<dataset>``, and its figure of them."""
        m = self.rows(results.metrics)
        out = {f"memeqa_types_{d}": table for (d,), table in type_tables(m).items()}
        return {**out, "memeqa_accuracy_by_type": figures.accuracy_by_type(m)[0]} if len(m) else out

    def aggregate(self, preds, items, scoring: Scoring, state=None) -> Tables:
        n, n_inv = len(preds), sum(not p.valid for p in preds)
        types = [it.meta.get("specific_type", "all") for it in items]
        n_trunc = n_truncated(preds)
        memes = cluster_codes(self, items)  # a meme's questions (up to 11 types) move together
        rows = []
        for name in scoring.names(self):  # exact and jaccard unless params list one of them
            vals = [p.scores[name] for p in preds]
            rows.append(
                metric_row(
                    "all",
                    f"{name}_micro",
                    vals,
                    n,
                    n_inv,
                    scoring=scoring,
                    n_truncated=n_trunc,
                    clusters=memes,
                )
            )
            stat, arrays = classification.macro_over_types_statistic(vals, types)
            ci = bootstrap_ci(stat, arrays, scoring.n_resamples, seed=scoring.seed, clusters=memes)
            rows.append(
                metric_row(
                    "all",
                    f"{name}_macro",
                    n=n,
                    n_invalid=n_inv,
                    n_truncated=n_trunc,
                    ci=ci,
                    clusters=memes,
                )
            )
            for t in sorted(set(types)):
                at = [i for i, tt in enumerate(types) if tt == t]
                sub_preds = [preds[i] for i in at]
                rows.append(
                    metric_row(
                        t,
                        name,
                        [vals[i] for i in at],
                        len(at),
                        sum(not p.valid for p in sub_preds),
                        scoring=scoring,
                        n_truncated=n_truncated(sub_preds),
                        clusters=memes[at],
                    )
                )
        return Tables(rows)


def type_tables(metrics: pd.DataFrame, metric: str = "exact") -> dict[tuple, pd.DataFrame]:
    """MemeQA's per-type table per dataset of multiple-choice rows (``metrics`` holds this task's
    rows): one row per model and prompt style, a column per question type, then the micro and
    macro averages."""
    out = {}
    for dataset, m in metrics.groupby("dataset"):
        types = m[m["metric"] == metric].pivot_table(
            index=["model", "style"], columns="subset", values="value"
        )
        avg = m[m["metric"].isin([f"{metric}_micro", f"{metric}_macro"])].pivot_table(
            index=["model", "style"], columns="metric", values="value"
        )
        out[(dataset,)] = types.join(avg.rename(columns=lambda c: c.split("_")[-1])).reset_index()
    return out
