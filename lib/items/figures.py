"""The item-quality figures: one panel per dataset, each a histogram of one item statistic, so a
reader sees at a glance where a dataset's items sit (all easy, all impossible, or spread)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

COLUMNS = 4  # panels per row: four fit the report's width at a readable size
BINS = 20


def distributions(
    values: dict[str, pd.Series], title: str, xlabel: str, limits: tuple | None = None
) -> tuple:
    """Per dataset (name -> its items' values) a histogram of the values, panels sharing the x
    axis (``limits``, else the values' range), each titled with its dataset and item count.
    Returns ``(fig, axes)``."""
    names = sorted(values)
    cols = min(COLUMNS, max(1, len(names)))
    rows = max(1, math.ceil(len(names) / cols))
    fig, axes = plt.subplots(
        rows, cols, figsize=(2.6 * cols + 0.6, 2.1 * rows + 0.8), squeeze=False, sharex=True
    )
    every = np.concatenate([np.asarray(values[n], dtype=float) for n in names] or [[0.0]])
    low, high = limits or (float(np.nanmin(every)), float(np.nanmax(every)))
    edges = np.linspace(low, high if high > low else low + 1, BINS + 1)
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    for ax, name in zip(axes.flat, names):
        v = np.asarray(values[name], dtype=float)
        ax.hist(np.clip(v[~np.isnan(v)], edges[0], edges[-1]), bins=edges, color="#4c72b0")
        ax.set_title(f"{name} ({len(v)} items)", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    for i, ax in enumerate(axes.flat[: len(names)]):
        if i + cols >= len(names):  # the lowest panel of its column: its axis is labelled
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel(xlabel, fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("items", fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig, axes
