"""YesBut's figures, one function per figure returning ``(fig, ax)`` (saved by
:func:`lib.pages.plots.save`): 01's two-panel cuts for a person to check, Figure 3 (annotation counts),
Figure 5 (understanding metrics) and Figure 14 (the human evaluation)."""

from __future__ import annotations

import pandas as pd

# matplotlib.pyplot is imported by each figure, not here: the task registry imports every family
# for any stage, and pyplot is one of the slowest imports of all


def panel_cuts(records: list[dict], n: int = 24, seed: int = 0, cols: int = 6):
    """Contact sheet of 01's two-panel cuts for a person to check: every image the layout check did
    not verify as two panels first (orange title: three panels, or no boundary found), then a
    seeded sample of verified ones, each with its cut drawn (red: found, dashed: the middle)."""
    import random

    import matplotlib.pyplot as plt
    from PIL import Image

    checked = [r for r in records if r.get("layout")]
    flagged = [r for r in checked if r["layout"]["panels"] != 2]
    rest = [r for r in checked if r["layout"]["panels"] == 2]
    shown = flagged[:n] + random.Random(seed).sample(rest, min(len(rest), max(0, n - len(flagged))))
    rows = max(1, (len(shown) + cols - 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.4 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, r in zip(axes.flat, shown):
        im = Image.open(r["path"])
        im.draft("RGB", (320, 320))  # a JPEG decodes at thumbnail size
        scale = im.width / (r.get("width") or im.width)
        ax.imshow(im)
        ok = r["layout"]["panels"] == 2
        ax.axvline(r["layout"]["cut"] * scale, color="red", lw=1.5, ls="-" if ok else "--")
        what = (
            "two panels" if ok else "three panels" if r["layout"]["panels"] == 3 else "not verified"
        )
        ax.set_title(
            f"{r['name'][:28]}\n{what}: {r['layout']['evidence'][:40]}",
            fontsize=6,
            color="black" if ok else "darkorange",
        )
    fig.suptitle(
        f"Panel cuts: {len(flagged)} of {len(checked)} images not verified as two panels (shown first)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig, axes


def yesbut_fig3(counts: dict):
    """YesBut Figure 3: annotation distributions (text in the image, connected halves, difficulty)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(counts), figsize=(4 * len(counts), 3.2), squeeze=False)
    axes = axes[0]
    for ax, (name, series) in zip(axes, counts.items()):
        ax.bar(series.index.astype(str), series.values, color="#4c72b0")
        for i, v in enumerate(series.values):
            ax.text(i, v, str(int(v)), ha="center", va="bottom", fontsize=8)
        ax.set_title(name.replace("_", " "))
        ax.tick_params(axis="x", rotation=20)
    axes[0].set_ylabel("images")
    fig.tight_layout()
    return fig, axes


def understanding_metrics(frame: pd.DataFrame):
    """YesBut Figure 5: per model, the mean of the four automated metrics (0-1 each: BLEU, ROUGE-L,
    METEOR, BERTScore) at annotation stages 2, 3, 4 and over all images; left panel the whole image
    (WHYFUNNY prompt), right panel the sub-images ("Describe the image", left and right averaged).
    ``frame`` is :meth:`lib.families.yesbut.task.Understanding.frame`."""
    import matplotlib.pyplot as plt

    mean = frame[
        (frame["metric"] == "mean of 4")
        & (frame["group"].str.startswith("stage") | (frame["group"] == "all"))
    ]
    groups = sorted({g for g in mean["group"] if g != "all"}) + ["all"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, (title, parts) in zip(
        axes,
        (
            ("whole image (WHYFUNNY prompt)", ["whole"]),
            ("sub-images (describe prompt)", ["left", "right"]),
        ),
    ):
        sub = mean[mean["part"].isin(parts)]
        table = sub.groupby(["group", "model"])["value"].mean().unstack("model").reindex(groups)
        if len(table.columns):
            table.plot.bar(ax=ax, width=0.8, legend=ax is axes[0])
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("")
        ax.tick_params(axis="x", rotation=0)
    axes[0].set_ylabel("mean of the 4 metrics")
    axes[0].set_ylim(0, 1)
    if axes[0].get_legend():
        axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig, axes[0]


def human_eval_bars(tidy: pd.DataFrame):
    """YesBut Figure 14: share of descriptions judged yes per criterion and source (model or human)."""
    import matplotlib.pyplot as plt

    table = tidy.groupby(["criterion", "source"])["yes"].mean().unstack("source")
    fig, ax = plt.subplots(figsize=(8, 3.5))
    table.plot.bar(ax=ax, width=0.8)
    ax.set_ylabel("share judged yes")
    ax.set_ylim(0, 1)
    ax.tick_params(axis="x", rotation=0)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    return fig, ax
