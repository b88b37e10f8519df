"""Scrapbook's figures, returning ``(fig, ax)`` (saved by :func:`lib.pages.plots.save`): the questions
per type and form of a generated set, and level-1 accuracy per concept and form (Figures 17-31)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def question_counts(counts: pd.DataFrame):
    """Questions per type, stacked by group (the shape of the paper's section 5.2 counts)."""
    import matplotlib.pyplot as plt  # here: stage 06 imports the family, and draws nothing

    table = counts.groupby(["type", "group"])["questions"].sum().unstack("group").fillna(0)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    table.plot.barh(stacked=True, ax=ax)
    ax.set_xlabel("questions")
    ax.set_ylabel("")
    ax.set_title("Scrapbook questions by type and position group")
    fig.tight_layout()
    return fig, ax


def scrapbook_level1(levels: pd.DataFrame, qtype: str = "presence", threshold: float = 0.8):
    """Scrapbook Figures 17-31: per level-1 concept, five bars - all forms (the aggregated bar that
    decides the concept) then original, condition, direction, enumerated - green at or above the
    threshold, red below, stacked over the wrong share in grey."""
    import matplotlib.pyplot as plt

    lv = levels[(levels["level"] == 1) & (levels["type"] == qtype)]
    forms = ["all", "original", "condition", "direction", "enumerated"]
    table = (
        lv.groupby(["concept", "form"])
        .apply(lambda g: g["correct"].sum() / g["n"].sum(), include_groups=False)
        .unstack("form")
        .reindex(columns=forms)
    )
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(table)), 3.8))
    width = 0.16
    for k, form in enumerate(forms):
        x = np.arange(len(table)) + (k - 2) * width
        acc = table[form].fillna(0).to_numpy()
        colors = ["#2ca02c" if a >= threshold else "#d62728" for a in acc]
        ax.bar(x, acc, width, color=colors, edgecolor="k", lw=1.2 if form == "all" else 0.3)
        ax.bar(x, 1 - acc, width, bottom=acc, color="#dddddd", edgecolor="k", lw=0.3)
    ax.axhline(threshold, color="k", ls="--", lw=0.8)
    ax.set_xticks(np.arange(len(table)), table.index, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"{qtype}: share correct")
    ax.set_title(
        "bars per concept: all forms (bold) | original | condition | direction | enumerated",
        fontsize=8,
    )
    fig.tight_layout()
    return fig, ax
