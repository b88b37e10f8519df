"""Figures: one function per figure, each returning ``(fig, ax)``; :func:`save` writes PDF + PNG."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FormatStrFormatter, LogLocator, MaxNLocator, NullFormatter


def save(fig, folder: str | Path, name: str, close: bool = False) -> list[Path]:
    """Write ``<folder>/<name>.pdf`` and ``.png`` (150 dpi); returns both paths. ``close`` frees the
    figure's pyplot state (the figure object stays displayable: a notebook shows what a step returns)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.pdf", folder / f"{name}.png"]
    fig.savefig(paths[0], bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight", dpi=150)
    if close:
        plt.close(fig)
    return paths


def image_grid(images: list, titles: list[str], cols: int = 3, grid_lines: bool = True):
    """Images side by side, each with the 3x3 grid of absolute regions drawn over it."""
    rows = (len(images) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, im, title in zip(axes.flat, images, titles):
        ax.imshow(im)
        if grid_lines:
            w, h = im.size
            for k in (1, 2):
                ax.axvline(k * w / 3, color="k", lw=0.6, ls="--", alpha=0.6)
                ax.axhline(k * h / 3, color="k", lw=0.6, ls="--", alpha=0.6)
        ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return fig, axes


def training_curve(curve: pd.DataFrame):
    """Two panels: the training loss per step (20-step mean, log scale, so the slow descent after the
    first drop stays visible) and, where it was measured, validation accuracy overall and per
    question type beside the majority answer's (per target kind the columns stay in the table).
    Returns the figure and the loss axis."""
    val = [
        c
        for c in curve.columns
        if c == "val_accuracy"
        or (c.startswith("val_accuracy_") and "_" not in c.removeprefix("val_accuracy_"))
    ]
    fig, axes = plt.subplots(1, 2 if val else 1, figsize=(9.5 if val else 5.5, 3.2), squeeze=False)
    ax = axes[0][0]
    ax.plot(curve["step"], curve["loss"].rolling(20, min_periods=1).mean())
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (20-step mean)")
    if val:
        acc = axes[0][1]
        rows = curve.dropna(subset=["val_accuracy"])
        for c in val:
            acc.plot(
                rows["step"],
                rows[c],
                marker="o",
                lw=2 if c == "val_accuracy" else 1.2,
                label=c.removeprefix("val_accuracy").strip("_") or "all",
            )
        if "val_majority" in rows and rows["val_majority"].notna().any():
            acc.axhline(
                rows["val_majority"].dropna().iloc[-1],
                color="grey",
                ls=":",
                lw=1.5,
                label="majority answer",
            )
        acc.set_xlabel("step")
        acc.set_ylabel("validation accuracy")
        acc.set_ylim(0, 1)
        acc.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig, ax


def accuracy_bars(table: pd.DataFrame, n: dict | None = None):
    """Accuracy per system (rows) and question type (columns ``accuracy_<type>[_<target>]``), one
    bar group per column, labelled by its type and target on two lines; with ``n`` (questions per
    column), each bar's 95% Wilson interval."""
    from scipy.stats import (
        binomtest,  # deferred on purpose: only the bars with intervals need scipy
    )

    labels = [
        c.removeprefix("accuracy").strip("_").replace("_", "\n") or "all" for c in table.columns
    ]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 1.5), 3.4))
    errors = None
    if n:

        def interval(acc: float, col: str) -> tuple[float, float]:
            if col not in n:  # e.g. macro, a mean of accuracies: no one count of questions
                return np.nan, np.nan
            ci = binomtest(round(acc * n[col]), n[col]).proportion_ci(method="wilson")
            return acc - ci.low, ci.high - acc

        errors = np.array(
            [
                [[interval(table.at[s, c], c)[side] for c in table.columns] for side in (0, 1)]
                for s in table.index
            ]
        )
    table.T.set_axis(labels).plot.bar(
        ax=ax, rot=0, width=0.8, yerr=errors, capsize=2, error_kw={"lw": 0.8}
    )
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(
        fontsize=8,
        ncol=len(table.index),
        loc="upper center",
        bbox_to_anchor=(0.5, 1.15),
        frameon=False,
    )
    fig.tight_layout()
    return fig, ax


# --- YesBut ------------------------------------------------------------------------------------------


def embedding_map(
    frame: pd.DataFrame, color: str, title: str, embedding: str, score: float | None = None
):
    """YesBut Figure 4-style map: 2-D points coloured by ``color``; the title names the embedding shown
    and the groups' separation (silhouette) when given."""
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for value, sub in frame.groupby(frame[color].astype(str)):
        ax.scatter(sub["x"], sub["y"], s=18, label=value, alpha=0.8)
    ax.legend(fontsize=7, title=color, title_fontsize=8, loc="best")
    sep = "" if score is None or score != score else f" · silhouette {score:.2f}"
    ax.set_title(f"{title}\n{embedding}{sep}", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.tight_layout()
    return fig, ax


# --- MemeQA ------------------------------------------------------------------------------------------


def af_curves(iterations: pd.DataFrame):
    """Adversarial filtering: discriminator accuracy and fooled questions per iteration."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(
        iterations["iteration"],
        iterations["discriminator_accuracy"],
        "o-",
        label="discriminator accuracy",
    )
    ax.set_ylim(0, 1)
    ax.set_xlabel("iteration")
    ax.xaxis.set_major_locator(
        MaxNLocator(integer=True)
    )  # iterations are counted, never fractional
    ax.set_ylabel("accuracy")
    ax2 = ax.twinx()
    ax2.bar(iterations["iteration"], iterations["fooled"], alpha=0.3, color="C1", label="fooled")
    ax2.set_ylabel("questions fooled")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig, ax


# --- Scrapbook ---------------------------------------------------------------------------------------


def topic_sizes(info: pd.DataFrame):
    """BERTopic: documents per topic (outliers, topic -1, in grey)."""
    fig, ax = plt.subplots(figsize=(6, 0.35 * len(info) + 1.2))
    labels = [f"{t}: {w[:40]}" for t, w in zip(info["Topic"], info["Words"])]
    ax.barh(
        labels, info["Count"], color=["#999999" if t == -1 else "#4c72b0" for t in info["Topic"]]
    )
    ax.invert_yaxis()
    ax.set_xlabel("documents")
    fig.tight_layout()
    return fig, ax
