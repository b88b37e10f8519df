"""The HTML report of a run: ``outputs/<run>/report.html`` (figures embedded as base64 PNG, so it
can be mailed). It opens with the results - each dataset x task x model x style's headline metric
with its interval and invalid rate, each linked to the answers behind it in the item browser
(:mod:`lib.pages.browser`, ``browser/`` beside the report), training against its baselines, the
adversarial filter's outcome - then, where stage 07 compared the run with another
(``compare_with``), the changed answers by first cause (each count linked to those answers in the
browser, both runs side by side), each group's headline score A, B and B - A with its interval,
verdict and corrected p, and the config diff - then the papers' reproductions, which score agrees
with people where stage 07 held the scorers to human labels (:mod:`lib.pages.agreement_view`), which
items are good (:mod:`lib.pages.items_view`: flags, figures, the flagged items with their images), a table of
contents, and one section per stage, in order. Long tables show their top rows and link their CSV. A stage whose
outputs are absent gets a line saying so and why, instead of failing the report. The run's provenance (params, seeds,
models, git SHA) and the invalid-answer rates are part of it. Every stage's outputs are read
through :mod:`lib.io.artifacts`, the stages' published layout. 06's metric tables are shown only when
they come from its current predictions (:func:`lib.io.artifacts.stale_tables`); otherwise the section
says they are withheld, why, and how to recompute them, and the report's first lines say so too.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from lib.core.paths import run_dir
from lib.io import artifacts
from lib.metrics.multiple import adjusted_text
from lib.metrics.stats import CHANGES, interval_text
from lib.pages import agreement_view, browser, items_view
from lib.pages.render import Link, table, write_page
from lib.tasks.registry import tasks

TITLES = {
    artifacts.SETUP: "Setup: models and probes",
    artifacts.COLLECT: "Collect: images and manifest",
    artifacts.ANNOTATE: "Annotate: annotations, agreement, style variants",
    artifacts.AF: "Adversarial filtering of distractors",
    artifacts.SCRAPBOOK: "Scrapbook: synthetic probing datasets",
    artifacts.TRAIN: "Train: fine-tuning",
    artifacts.EVALUATE: "Evaluate: predictions, metrics, Scrapbook protocol",
    artifacts.ANALYZE: "Analyze: maps, topics, the papers' figures",
}
DATA_TABLES = {"umap_images"}  # written for reuse; the report shows their figures instead
# A part of a section (lib/data/templates/tables.html's block): a paragraph (text), a table
# (lib.pages.render.table), a figure ({"png": base64, "name": ...}) or {"withheld": why}.
Block = str | dict


def _csv(path: Path, title: str, root: Path) -> Block:
    try:
        df = pd.read_csv(path)
    except (pd.errors.EmptyDataError, FileNotFoundError):
        return f"{title}: empty"
    return table(df, title, index=False, csv=str(path.relative_to(root)))


def _provenance(folder: Path) -> dict | None:
    """The stage's provenance line (when, which commit, the seed) and its parameters as JSON."""
    p = folder / artifacts.PROVENANCE
    if not p.exists():
        return None
    prov = json.loads(p.read_text())
    git = prov.get("git", {})
    return {
        "head": f"created {prov.get('created', '?')} · git {str(git.get('sha', '?'))[:12]}"
        f"{' (dirty)' if git.get('dirty') else ''} · seed {prov.get('seed')}",
        "params": json.dumps(prov.get("params", {}), indent=1, default=str),
    }


def _figures(folder: Path, shown: set[str]) -> list[Block]:
    """The folder's figures, each once in the report (a later stage redrawing one is skipped)."""
    out = []
    for p in sorted(folder.rglob("figures/*.png")):
        if p.stem not in shown:
            shown.add(p.stem)
            out.append({"png": base64.b64encode(p.read_bytes()).decode(), "name": p.stem})
    return out


def _evaluate_tables(root: Path, folder: Path) -> list[Block]:
    """Stage 06's invalid and cut-off answers, every metric of the whole sets, and Scrapbook's errors."""
    m = artifacts.read_table(root, artifacts.EVALUATE, artifacts.METRICS)
    if m is None:
        return []
    csv = f"{artifacts.EVALUATE}/{artifacts.METRICS}"
    inv = m[m["metric"] == "invalid_rate"][
        ["model", "dataset", "task", "style", "value", "n", "n_invalid", "n_truncated"]
    ]
    head = m[m["subset"].isin(["all", "non-absurd"]) & (m["metric"] != "invalid_rate")]
    every = head.pivot_table(
        index=["dataset", "task", "metric"], columns=["model", "style"], values="value"
    )
    return [
        table(
            inv.rename(columns={"value": "invalid_rate"}),
            "Invalid answers (kept raw, counted wrong) and answers cut off by the token limit",
            csv=csv,
        ),
        table(every, "Every metric of the whole sets", csv=csv),
        _csv(folder / "errors.csv", "Scrapbook overall and error categories (errors.csv)", root),
    ]


def _stage_body(root: Path, stage: str, folder: Path, shown: set[str]) -> list[Block]:
    parts: list[Block] = []
    summary = artifacts.read_summary(root, stage) or {}
    if stage == artifacts.SETUP and summary:
        parts.append(
            f"{summary['probe_answers']} probe answers from {summary['models']} models "
            f"({summary['constrained_invalid']} constrained answers invalid); demo datasets: "
            f"{', '.join(summary['datasets']) or 'none'}."
        )
        parts.append(_csv(folder / artifacts.PROBE, "Probe answers", root))
    if stage == artifacts.COLLECT and (
        rep := artifacts.read_json(root, stage, artifacts.COLLECT_REPORT)
    ):
        parts.append(
            f"{rep['collected']} images collected, {len(rep['bad_files'])} bad files, "
            f"{len(rep['duplicates'])} duplicates removed, {rep['kept']} kept."
        )
    if stage == artifacts.ANNOTATE:
        parts.append(_csv(folder / artifacts.AGREEMENT, "Agreement per categorical field", root))
    if stage == artifacts.AF and summary and (folder / artifacts.SHORTCUTS).exists():
        what = "Shortcut audit: how often a text-only tell picks the answer, beside chance"
        parts.append(_csv(folder / artifacts.SHORTCUTS, f"{what} (lib.metrics.shortcuts)", root))
    if stage == artifacts.SCRAPBOOK:
        for name, d in summary.get("datasets", {}).items():
            parts.append(f"{name}: {d['images']} images, {d['questions']:,} questions")
    if stage == artifacts.TRAIN and summary:
        systems = pd.DataFrame({k: summary[k] for k in artifacts.TRAIN_SYSTEMS if k in summary}).T
        n = f"({summary.get('n_test')} questions)"
        parts.append(table(systems, f"Held-out accuracy by question type and target kind {n}"))
        what = "over the majority answer and over itself asked about blank pictures"
        if summary.get("margins"):  # a run of older code has none
            margins = pd.DataFrame(summary["margins"])
            parts.append(
                table(margins, f"The trained model's margin {what}, 95% over images", 8, False)
            )
    if stage == artifacts.EVALUATE:
        parts += _evaluate_tables(root, folder)
    if stage == artifacts.ANALYZE:
        for p in sorted((folder / artifacts.TABLES).glob("*.csv")):
            # point coordinates are data for a figure, not a table to read
            if p.stem not in DATA_TABLES:
                parts.append(_csv(p, p.stem.replace("_", " "), root))
    return parts + _figures(folder, shown)


def headline_rows(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per dataset x task x model x style: the task's headline metric (:attr:`lib.tasks.Task.headline`)
    with its interval, n and clusters, and the group's invalid rate."""
    # tables written before intervals resampled images: every answer its own cluster
    if "n_clusters" not in metrics:
        metrics = metrics.assign(n_clusters=metrics["n"])
    invalid = metrics[metrics["metric"] == "invalid_rate"].set_index(
        ["dataset", "task", "model", "style"]
    )["value"]
    frames = []
    for task in tasks().values():
        subset, metric = task.headline
        rows = task.rows(metrics)
        frames.append(rows[(rows["subset"] == subset) & (rows["metric"] == metric)])
    head = pd.concat(frames, ignore_index=True) if frames else metrics.head(0)
    head = head.assign(
        invalid_rate=[
            invalid.get(k) for k in zip(head["dataset"], head["task"], head["model"], head["style"])
        ]
    )
    return head.sort_values(["dataset", "task", "model", "style"])[
        [
            "dataset",
            "task",
            "model",
            "style",
            "subset",
            "metric",
            "value",
            "ci_low",
            "ci_high",
            "n",
            "n_clusters",
            "invalid_rate",
        ]
    ]


def _headline_table(root: Path, head: pd.DataFrame) -> dict:
    """The headline rows, each value with its interval and linked to its answers in the browser."""
    has_items = (root / browser.FOLDER / "index.html").exists()
    links = [
        Link(browser.link(dataset=d, task=t, model=m, style=s), "items") if has_items else ""
        for d, t, m, s in zip(head["dataset"], head["task"], head["model"], head["style"])
    ]
    shown = zip(head["value"], head["ci_low"], head["ci_high"], head["n_clusters"])
    head["value (95% CI)"] = [interval_text(*r) for r in shown]
    head["invalid_rate"] = head["invalid_rate"].map(lambda v: f"{v:.1%}" if pd.notna(v) else "")
    first = ["dataset", "task", "model", "style", "subset", "metric"]
    head = head[first + ["value (95% CI)", "n", "n_clusters", "invalid_rate"]].assign(answers=links)
    caption = (
        "Headline metrics: one per dataset, task, model and prompt style (95% bootstrap interval over "
        "the n_clusters images the n answers are about - Scrapbook: image chains - since answers "
        "about one image move together, flagged instead below lib.metrics.stats.MIN_CLUSTERS images; "
        "invalid answers are counted wrong)"
    )
    return table(head, caption, max_rows=len(head), index=False)


def _results(root: Path) -> list[Block]:
    """The first screen: headline metrics (each linked to its answers), training against its
    baselines, the adversarial filter's outcome."""
    parts: list[Block] = []
    folder = artifacts.stage_folder(root, artifacts.EVALUATE)
    why = artifacts.stale_tables(folder) if folder.is_dir() else None
    metrics = None if why else artifacts.read_table(root, artifacts.EVALUATE, artifacts.METRICS)
    if metrics is not None and len(metrics):
        parts.append(_headline_table(root, headline_rows(metrics)))
    elif why:
        parts.append({"withheld": why})
    train = artifacts.read_summary(root, artifacts.TRAIN) or {}
    if "trained" in train:
        systems = pd.DataFrame({k: train[k] for k in artifacts.TRAIN_SYSTEMS[::-1] if k in train}).T
        parts.append(
            table(
                systems[[c for c in systems.columns if c.count("_") <= 1]],
                f"Fine-tuning (stage 05): "
                f"held-out accuracy of the trained model, itself asked about blank pictures, its "
                f"base and the majority answer "
                f"({train.get('n_test')} questions)",
                max_rows=5,
            )
        )
    af = artifacts.read_summary(root, artifacts.AF) or {}
    if "questions" in af:
        parts.append(
            f"Adversarial filtering (stage 03): {af['questions']} questions kept from {af['skeletons']} "
            f"skeletons; {af['fooled']} fooled every discriminator; {af['blind_answerable']} answerable "
            f"without the image."
        )
    return parts


def _linked_counts(causes: pd.DataFrame, has_items: bool) -> pd.DataFrame:
    """The per-cause table with its counts linked to those answers in the item browser."""
    linked = causes.assign(because=causes["because"].fillna(""))
    for col in ["items", *CHANGES]:
        linked[col] = [
            Link(browser.link(cause=c, change=None if col == "items" else col), str(n))
            if has_items and n
            else n
            for c, n in zip(linked["cause"], linked[col])
        ]
    return linked.rename(columns={"items": "changed"})


def _headline_differences(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each group's headline score: A, B, B - A with its interval, the verdict, p with Holm's and
    BH's (``*``: survives the correction), and the causes that carry B - A."""
    head = metrics[metrics["headline"].astype(str) == "True"]
    shares = [c for c in metrics.columns if c.endswith(" share")]
    return pd.DataFrame(
        {
            "group": [
                "/".join(map(str, g))
                for g in zip(*(head[d] for d in ("dataset", "task", "model", "style")))
            ],
            "score": head["metric"],
            "n": head["n"],
            "n_clusters": head["n_clusters"],
            "A": head["A"],
            "B": head["B"],
            "B - A (95% CI)": [
                interval_text(d, lo, hi, c, fmt="+.3f")
                for d, lo, hi, c in head[["difference", "ci_low", "ci_high", "n_clusters"]].values
            ],
            "verdict": head["words"].fillna(""),
            "p (Holm; BH)": [
                adjusted_text(*r) for r in head[["p", "p_holm", "holm", "p_bh", "bh"]].values
            ],
            "carried by": [
                "; ".join(f"{c[:-6]} {r[c]:+.3f}" for c in shares if r[c])
                for _, r in head.iterrows()
            ],
        }
    )


def _comparison(root: Path) -> dict | None:
    """Stage 07's comparison of this run (B) with another (A, ``compare_with``): the counts, the
    changed answers by first cause (linked to the item browser), each group's headline score A, B
    and B - A, and the config diff; None when 07 compared nothing."""
    found = artifacts.read_comparison(root)
    if found is None:
        return None
    tables = found["tables"]
    causes = table(
        _linked_counts(tables["causes"], (root / browser.FOLDER / "index.html").exists()),
        "Changed answers by first cause: which way their "
        "scores moved (each count opens those answers in the item browser, both runs side by side)",
        index=False,
        csv=f"{artifacts.ANALYZE}/{artifacts.COMPARED_CAUSES}",
    )
    head = _headline_differences(tables["metrics"])
    metrics = table(
        head,
        "Headline score per group (the per-answer score its task's headline is made of): A, B, "
        "B - A with its 95% small-sample interval over the n_clusters images or image chains "
        "(CR2 standard error, t quantiles), the verdict in words, the interval's p with Holm's "
        "and Benjamini-Hochberg's across every row (* survives at 0.05) and the causes",
        max_rows=len(head),
        index=False,
    )
    config = tables["config"]
    what = "Config diff: every resolved value that differs, and where each came from"
    return {
        **{k: found[k] for k in ("paired", "changed", "only_A", "only_B")},
        "other": browser.run_label(found["A"]),
        "causes": causes,
        "metrics": metrics,
        "every": f"{artifacts.ANALYZE}/{artifacts.COMPARED_METRICS}",
        "config": table(config, what, index=False, max_rows=len(config)) if len(config) else None,
    }


REPRODUCIBLE = (
    "Scrapbook's question counts and Tables 5, 6 and 8: `make run PROFILE=unique_all`; YesBut's Figures 3 "
    "and 14: `make run PROFILE=yesbut` (its repository cloned as params/07_analyze.yesbut.yaml says); "
    "MemeQA's release statistics: `make run PROFILE=memeqa`"
)


def _section(root: Path, stage: str, title: str, shown: set[str]) -> dict:
    """A stage's section: why it is absent, or its provenance and its body (its tables withheld,
    with why, where they do not come from its current outputs)."""
    folder = artifacts.stage_folder(root, stage)
    said = {"stage": stage, "title": title}
    if not folder.is_dir():
        return said | {"absent": "no outputs: the stage was not run for this run"}
    if not any(folder.iterdir()):
        return said | {"absent": "its folder is empty"}
    why = artifacts.stale_tables(folder) if stage == artifacts.EVALUATE else None
    body = [{"withheld": why}] if why else _stage_body(root, stage, folder, shown)
    return said | {"stale": bool(why), "provenance": _provenance(folder), "blocks": body}


def build_report(run: str | Path, out: Path | None = None) -> Path:
    """Write ``<run folder>/report.html`` from whatever stage outputs exist; returns its path.
    ``run`` is a run name (``outputs/<run>/``) or a run folder. The page is
    ``lib/data/templates/report.html``."""
    root = Path(run) if isinstance(run, Path) else run_dir(run)
    shown: set[str] = set()
    items = items_view.section(root, shown)  # first: its figures are not shown again below
    sections = [_section(root, stage, title, shown) for stage, title in TITLES.items()]
    # every paper number a stage of this run reproduced (its paper.csv: the paper's value beside
    # ours, equal or with the reason they differ)
    papers = {s: artifacts.stage_folder(root, s) / artifacts.PAPER for s in artifacts.STAGES}
    return write_page(
        out or root / artifacts.REPORT,
        "report.html",
        run=root.name,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        sections=sections,
        absent=[s["stage"] for s in sections if "absent" in s],
        stale=[s["stage"] for s in sections if s.get("stale")],
        results=_results(root),
        compared=_comparison(root),
        reproduced=[_csv(p, stage, root) for stage, p in papers.items() if p.exists()],
        reproducible=REPRODUCIBLE,
        agreed=agreement_view.section(root),
        items=items,
    )
