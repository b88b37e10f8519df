"""Figures: one function per figure, each returning ``(fig, ax)``; :func:`save` writes PDF + PNG."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd


def save(fig, folder: str | Path, name: str) -> list[Path]:
    """Write ``<folder>/<name>.pdf`` and ``.png`` (150 dpi); returns both paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.pdf", folder / f"{name}.png"]
    fig.savefig(paths[0], bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight", dpi=150)
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


def question_counts(counts: pd.DataFrame):
    """Questions per type, stacked by group (the shape of the paper's section 5.2 counts)."""
    table = counts.groupby(["type", "group"])["questions"].sum().unstack("group").fillna(0)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    table.plot.barh(stacked=True, ax=ax)
    ax.set_xlabel("questions")
    ax.set_ylabel("")
    ax.set_title("Scrapbook questions by type and position group")
    fig.tight_layout()
    return fig, ax


def training_curve(curve: pd.DataFrame):
    """Training loss per step (smoothed) and validation accuracy where it was measured."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    ax.plot(curve["step"], curve["loss"].rolling(20, min_periods=1).mean(), label="training loss (20-step mean)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    val = [c for c in curve.columns if c.startswith("val_accuracy")]
    if val:
        ax2 = ax.twinx()
        rows = curve.dropna(subset=["val_accuracy"])
        for c in val:
            ax2.plot(rows["step"], rows[c], marker="o", ls="--", label=c.replace("val_", "validation "))
        ax2.set_ylabel("validation accuracy")
        ax2.set_ylim(0, 1)
        ax2.legend(loc="upper right", fontsize=7)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    return fig, ax


def accuracy_bars(table: pd.DataFrame):
    """Accuracy per system (rows) and question type (columns)."""
    fig, ax = plt.subplots(figsize=(6, 3))
    table.T.plot.bar(ax=ax, rot=0)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig, ax
