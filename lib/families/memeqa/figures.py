"""MemeQA's figure: accuracy per question type, returning ``(fig, ax)`` (saved by
:func:`lib.pages.plots.save`)."""

from __future__ import annotations

import pandas as pd

# matplotlib.pyplot is imported by each figure, not here: the task registry imports every family
# for any stage, and pyplot is one of the slowest imports of all


def accuracy_by_type(metrics: pd.DataFrame, metric: str = "exact"):
    """MemeQA: accuracy per question type with the micro and macro averages as lines; ``metrics``
    holds the multiple-choice task's rows (:meth:`lib.tasks.Task.rows`)."""
    import matplotlib.pyplot as plt

    table = metrics[metrics["metric"] == metric].pivot_table(
        index="subset", columns=["model", "style"], values="value"
    )
    fig, ax = plt.subplots(figsize=(7, 3.5))
    table.plot.barh(ax=ax, width=0.8)
    for (model, style), ls in zip(table.columns, ("-", "--", ":", "-.") * 4):
        for kind, color in (("micro", "k"), ("macro", "r")):
            row = metrics[
                (metrics["metric"] == f"{metric}_{kind}")
                & (metrics["model"] == model)
                & (metrics["style"] == style)
            ]
            if len(row):
                ax.axvline(row["value"].iloc[0], color=color, ls=ls, lw=0.8)
    ax.set_xlabel(f"{metric} (black: micro, red: macro average)")
    ax.set_xlim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig, ax
