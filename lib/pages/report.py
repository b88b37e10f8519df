"""The HTML report of a run: ``outputs/<run>/report.html`` (figures embedded as base64 PNG, so it
can be mailed). It opens with the results - each dataset x task x model x style's headline metric
with its interval and invalid rate, each linked to the answers behind it in the item browser
(:mod:`lib.pages.browser`, ``browser/`` beside the report), training against its baselines, the
adversarial filter's outcome - then, where stage 07 compared the run with another
(``compare_with``), the changed answers by first cause (each count linked to those answers in the
browser, both runs side by side), each group's headline score A, B and B - A with its interval,
verdict and corrected p, and the config diff - then the papers' reproductions, which score agrees
with people where stage 07 held the scorers to human labels (:mod:`lib.pages.agreement_view`), a table of
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
from lib.io import artifacts, atomic_file
from lib.metrics.multiple import adjusted_text
from lib.metrics.stats import CHANGES, interval_text
from lib.pages import agreement_view, browser
from lib.pages.htmlsafe import csp_meta, href, text
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
_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
h1{border-bottom:2px solid #444}h2{margin-top:2em;border-bottom:1px solid #bbb}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}
img{max-width:min(100%,760px);margin:.5em 0;border:1px solid #eee}.absent{color:#a00}.prov{font-size:11px;color:#555}
details{margin:.3em 0}nav ol{columns:2;font-size:14px}.more{font-size:12px;color:#555}"""
TOP_ROWS = 10  # a long table shows this many rows and links its CSV


DATA_TABLES = {"umap_images"}  # written for reuse; the report shows their figures instead


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img src="data:image/png;base64,{data}" alt="{text(path.stem)}"><figcaption>{text(path.stem)}</figcaption></figure>'


def _table(
    df: pd.DataFrame,
    title: str = "",
    max_rows: int = TOP_ROWS,
    index: bool = True,
    csv: str = "",
    escape: bool = True,
) -> str:
    """An HTML table: counts as integers, other numbers to 3 decimals; a tidy frame without its
    row numbers (``index=False``). A longer table shows its top ``max_rows`` and links its ``csv``
    (a path relative to the report). ``escape=False``: cells hold HTML made here (links)."""
    more = ""
    if len(df) > max_rows:
        where = (
            f' - all {len(df)} in <a href="{href(csv)}">{text(Path(csv).name)}</a>' if csv else ""
        )
        more = f"<p class='more'>top {max_rows} of {len(df)} rows{where}</p>"
    head = f"<h4>{text(title)}</h4>" if title else ""
    df = df.head(max_rows).copy()
    for col in df.columns:
        values = df[col]
        if (
            values.dtype.kind == "f"
            and values.notna().any()
            and (values.dropna() % 1 == 0).all()
            and (values.dropna().abs() > 1).any()
        ):
            df[col] = values.astype("Int64")  # a column of counts, not 12.000
    return (
        head
        + df.to_html(
            float_format=lambda v: f"{v:.3f}", na_rep="", border=0, index=index, escape=escape
        )
        + more
    )


def _csv(path: Path, title: str, root: Path | None = None, **kw) -> str:
    try:
        df = pd.read_csv(path, **kw)
    except (pd.errors.EmptyDataError, FileNotFoundError):
        return f"<p>{text(title)}: empty</p>"
    return _table(df, title, index=False, csv=str(path.relative_to(root)) if root else str(path))


def _provenance(folder: Path) -> str:
    p = folder / artifacts.PROVENANCE
    if not p.exists():
        return "<p class='prov'>no provenance.json</p>"
    prov = json.loads(p.read_text())
    git = prov.get("git", {})
    head = (
        f"created {prov.get('created', '?')} · git {str(git.get('sha', '?'))[:12]}"
        f"{' (dirty)' if git.get('dirty') else ''} · seed {prov.get('seed')}"
    )
    return (
        f"<p class='prov'>{text(head)}</p><details><summary>parameters</summary><pre>"
        f"{text(json.dumps(prov.get('params', {}), indent=1, default=str))}</pre></details>"
    )


def _figures(folder: Path, shown: set[str]) -> str:
    """The folder's figures, each once in the report (a later stage redrawing one is skipped)."""
    out = []
    for p in sorted(folder.rglob("figures/*.png")):
        if p.stem not in shown:
            shown.add(p.stem)
            out.append(_img(p))
    return "".join(out)


def _withheld(why: str) -> str:
    """A section whose tables do not come from its current outputs: neither they nor the figures
    drawn from them are shown (they may be another run's numbers)."""
    return (
        f"<p class='absent'><b>Metrics withheld: stale or unverified tables.</b> {text(why)}</p>"
        f"<p class='absent'>This section's figures are withheld with them.</p>"
    )


def _stage_body(root: Path, stage: str, folder: Path, shown: set[str]) -> str:
    parts = []
    summary = artifacts.read_summary(root, stage) or {}
    if stage == artifacts.SETUP and summary:
        parts.append(
            f"<p>{summary['probe_answers']} probe answers from {summary['models']} models "
            f"({summary['constrained_invalid']} constrained answers invalid); demo datasets: "
            f"{text(', '.join(summary['datasets']) or 'none')}.</p>"
        )
        parts.append(_csv(folder / artifacts.PROBE, "Probe answers", root))
    if stage == artifacts.COLLECT and (
        rep := artifacts.read_json(root, stage, artifacts.COLLECT_REPORT)
    ):
        parts.append(
            f"<p>{rep['collected']} images collected, {len(rep['bad_files'])} bad files, "
            f"{len(rep['duplicates'])} duplicates removed, {rep['kept']} kept.</p>"
        )
    if stage == artifacts.ANNOTATE:
        parts.append(_csv(folder / artifacts.AGREEMENT, "Agreement per categorical field", root))
    if stage == artifacts.AF and summary:
        if (folder / artifacts.SHORTCUTS).exists():
            parts.append(
                _csv(
                    folder / artifacts.SHORTCUTS,
                    "Shortcut audit: how often a text-only tell picks the answer, "
                    "beside chance (lib.metrics.shortcuts)",
                    root,
                )
            )
    if stage == artifacts.SCRAPBOOK:
        for name, d in summary.get("datasets", {}).items():
            parts.append(f"<p>{text(name)}: {d['images']} images, {d['questions']:,} questions</p>")
    if stage == artifacts.TRAIN and summary:
        table = pd.DataFrame({k: summary[k] for k in artifacts.TRAIN_SYSTEMS if k in summary}).T
        n = f"({summary.get('n_test')} questions)"
        parts.append(_table(table, f"Held-out accuracy by question type and target kind {n}"))
        what = "over the majority answer and over itself asked about blank pictures"
        if summary.get("margins"):  # a run of older code has none
            margins = pd.DataFrame(summary["margins"])
            parts.append(
                _table(margins, f"The trained model's margin {what}, 95% over images", 8, False)
            )
    m = (
        artifacts.read_table(root, stage, artifacts.METRICS)
        if stage == artifacts.EVALUATE
        else None
    )
    if m is not None:
        inv = m[m["metric"] == "invalid_rate"][
            ["model", "dataset", "task", "style", "value", "n", "n_invalid", "n_truncated"]
        ]
        parts.append(
            _table(
                inv.rename(columns={"value": "invalid_rate"}),
                "Invalid answers (kept raw, counted wrong) and answers cut off by the token limit",
                csv=f"{artifacts.EVALUATE}/{artifacts.METRICS}",
            )
        )
        head = m[m["subset"].isin(["all", "non-absurd"]) & (m["metric"] != "invalid_rate")]
        parts.append(
            _table(
                head.pivot_table(
                    index=["dataset", "task", "metric"], columns=["model", "style"], values="value"
                ),
                "Every metric of the whole sets",
                csv=f"{artifacts.EVALUATE}/{artifacts.METRICS}",
            )
        )
        parts.append(
            _csv(folder / "errors.csv", "Scrapbook overall and error categories (errors.csv)", root)
        )
    if stage == artifacts.ANALYZE:
        for p in sorted((folder / artifacts.TABLES).glob("*.csv")):
            # point coordinates are data for a figure, not a table to read
            if p.stem not in DATA_TABLES:
                parts.append(_csv(p, p.stem.replace("_", " "), root))
    parts.append(_figures(folder, shown))
    return "".join(parts)


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


def _headline_table(root: Path, head: pd.DataFrame) -> str:
    """The headline rows, each value with its interval and linked to its answers in the browser."""
    links = [
        f'<a href="{href(browser.link(dataset=d, task=t, model=m, style=s))}">items</a>'
        if (root / browser.FOLDER / "index.html").exists()
        else ""
        for d, t, m, s in zip(head["dataset"], head["task"], head["model"], head["style"])
    ]
    shown = zip(head["value"], head["ci_low"], head["ci_high"], head["n_clusters"])
    head["value (95% CI)"] = [interval_text(*r) for r in shown]
    head["invalid_rate"] = head["invalid_rate"].map(lambda v: f"{v:.1%}" if pd.notna(v) else "")
    first = ["dataset", "task", "model", "style", "subset", "metric"]
    head = head[first + ["value (95% CI)", "n", "n_clusters", "invalid_rate"]]
    # every cell from data is text...
    head = head.map(lambda v: text(v) if isinstance(v, str) else v)
    head["answers"] = links  # ...and the links are the tags made here
    caption = (
        "Headline metrics: one per dataset, task, model and prompt style (95% bootstrap interval over "
        "the n_clusters images the n answers are about - Scrapbook: image chains - since answers "
        "about one image move together, flagged instead below lib.metrics.stats.MIN_CLUSTERS images; "
        "invalid answers are counted wrong)"
    )
    return _table(head, caption, max_rows=len(head), index=False, escape=False)


def _results(root: Path) -> str:
    """The first screen: headline metrics (each linked to its answers), training against its
    baselines, the adversarial filter's outcome."""
    parts = []
    folder = artifacts.stage_folder(root, artifacts.EVALUATE)
    why = artifacts.stale_tables(folder) if folder.is_dir() else None
    metrics = None if why else artifacts.read_table(root, artifacts.EVALUATE, artifacts.METRICS)
    if metrics is not None and len(metrics):
        parts.append(_headline_table(root, headline_rows(metrics)))
    elif why:
        parts.append(_withheld(why))
    train = artifacts.read_summary(root, artifacts.TRAIN) or {}
    if "trained" in train:
        table = pd.DataFrame({k: train[k] for k in artifacts.TRAIN_SYSTEMS[::-1] if k in train}).T
        parts.append(
            _table(
                table[[c for c in table.columns if c.count("_") <= 1]],
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
            f"<p>Adversarial filtering (stage 03): {af['questions']} questions kept from {af['skeletons']} "
            f"skeletons; {af['fooled']} fooled every discriminator; {af['blind_answerable']} answerable "
            f"without the image.</p>"
        )
    return (
        "".join(parts)
        or "<p class='absent'>No results: stages 03, 05 and 06 have no outputs in this run.</p>"
    )


def _linked_counts(causes: pd.DataFrame, has_items: bool) -> pd.DataFrame:
    """The per-cause table with its counts linked to those answers in the item browser."""
    table = causes.copy()
    table["because"] = table["because"].fillna("").map(text)
    for col in ["items", *CHANGES]:
        table[col] = [
            f'<a href="{href(browser.link(cause=c, change=None if col == "items" else col))}">{n}</a>'
            if has_items and n
            else str(n)
            for c, n in zip(table["cause"], table[col])
        ]
    return table.rename(columns={"items": "changed"})


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


def _comparison(root: Path) -> str:
    """Stage 07's comparison of this run (B) with another (A, ``compare_with``): the counts, the
    changed answers by first cause (linked to the item browser), each group's headline score A, B
    and B - A, and the config diff; empty when 07 compared nothing."""
    found = artifacts.read_comparison(root)
    if found is None:
        return ""
    other, tables = browser.run_label(found["A"]), found["tables"]
    has_items = (root / browser.FOLDER / "index.html").exists()
    intro = (
        f"<p>This run is B, <b>{text(other)}</b> is A: every answer both gave (same dataset, task, model, style "
        f"and item) is paired, and a changed one is put on the first step where the two part ways - the "
        f"request (prompt), the raw reply (model), its reading, its scoring. {found['paired']} answers paired, "
        f"{found['changed']} changed; only in A: {found['only_A']}, only in B: {found['only_B']}.</p>"
    )
    causes = _table(
        _linked_counts(tables["causes"], has_items),
        "Changed answers by first cause: which way their "
        "scores moved (each count opens those answers in the item browser, both runs side by side)",
        index=False,
        escape=False,
        csv=f"{artifacts.ANALYZE}/{artifacts.COMPARED_CAUSES}",
    )
    head = _headline_differences(tables["metrics"]).map(
        lambda v: text(v) if isinstance(v, str) else v
    )
    every = f"{artifacts.ANALYZE}/{artifacts.COMPARED_METRICS}"
    metrics = (
        _table(
            head,
            "Headline score per group (the per-answer score its task's headline is made of): A, B, "
            "B - A with its 95% small-sample interval over the n_clusters images or image chains "
            "(CR2 standard error, t quantiles), the verdict in words, the interval's p with Holm's "
            "and Benjamini-Hochberg's across every row (* survives at 0.05) and the causes",
            max_rows=len(head),
            index=False,
            escape=False,
        )
        + f"<p class='more'>every per-item metric: <a href=\"{href(every)}\">{text(every)}</a></p>"
    )
    config = tables["config"]
    diff = (
        _table(
            config,
            "Config diff: every resolved value that differs, and where each came from",
            index=False,
            max_rows=len(config),
        )
        if len(config)
        else "<p>Config diff: none - the runs were asked alike.</p>"
    )
    return f"<h2 id='comparison'>Compared with {text(other)}</h2>" + intro + causes + metrics + diff


REPRODUCIBLE = (
    "Scrapbook's question counts and Tables 5, 6 and 8: `make run PROFILE=unique_all`; YesBut's Figures 3 "
    "and 14: `make run PROFILE=yesbut` (its repository cloned as params/07_analyze.yesbut.yaml says); "
    "MemeQA's release statistics: `make run PROFILE=memeqa`"
)


def _reproduction(root: Path) -> str:
    """Every paper number a stage of this run reproduced (its ``paper.csv``: the paper's value beside
    ours, equal or with the reason they differ), or what would reproduce them."""
    tables = [
        (stage, artifacts.stage_folder(root, stage) / artifacts.PAPER) for stage in artifacts.STAGES
    ]
    parts = [_csv(path, f"{stage}", root) for stage, path in tables if path.exists()]
    if not parts:
        return (
            f"<p>This run computes none of the papers' determined numbers: they need the papers' data or "
            f"parameters ({text(REPRODUCIBLE)}).</p>"
        )
    return (
        "<p>Each row: the paper's value, ours, whether they are equal, and why not where they differ.</p>"
        + "".join(parts)
    )


def _contents(stages: list[tuple[str, str]], compared: bool = False, agreed: bool = False) -> str:
    links = (
        [("results", "Results")]
        + ([("comparison", "Compared with another run")] if compared else [])
        + [("reproduction", "Reproduction: the papers beside this run")]
        + ([(agreement_view.ANCHOR, agreement_view.HEADING)] if agreed else [])
    )
    links += [(f"stage-{stage}", f"{stage} · {title}") for stage, title in stages]
    return (
        "<nav><h2>Contents</h2><ol>"
        + "".join(f'<li><a href="#{a}">{text(t)}</a></li>' for a, t in links)
        + "</ol></nav>"
    )


def build_report(run: str | Path, out: Path | None = None) -> Path:
    """Write ``<run folder>/report.html`` from whatever stage outputs exist; returns its path.
    ``run`` is a run name (``outputs/<run>/``) or a run folder."""
    root = Path(run) if isinstance(run, Path) else run_dir(run)
    run = root.name
    out = out or root / artifacts.REPORT
    sections, absent, stale, shown = [], [], [], set()
    for stage, title in TITLES.items():
        folder = artifacts.stage_folder(root, stage)
        if not folder.is_dir() or not any(folder.iterdir()):
            why = (
                "no outputs: the stage was not run for this run"
                if not folder.is_dir()
                else "its folder is empty"
            )
            absent.append(stage)
            sections.append(
                f"<h2 id='stage-{stage}'>{stage} · {text(title)}</h2><p class='absent'>Absent - "
                f"{why}.</p>"
            )
            continue
        why = artifacts.stale_tables(folder) if stage == artifacts.EVALUATE else None
        if why:
            stale.append(stage)
        body = _withheld(why) if why else _stage_body(root, stage, folder, shown)
        sections.append(
            f"<h2 id='stage-{stage}'>{stage} · {text(title)}</h2>{_provenance(folder)}{body}"
        )
    created = datetime.now(UTC).isoformat(timespec="seconds")
    compared, agreed = _comparison(root), agreement_view.section(root, _table)
    summary = (
        f"<p>Run <b>{text(run)}</b>, report built {created}. Sections without outputs: "
        f"{', '.join(absent) or 'none'}.</p>"
    )
    if stale:
        summary += (
            f"<p class='absent'><b>Stale results withheld</b> in {', '.join(stale)}: the tables do not come "
            f"from the current predictions (see the section).</p>"
        )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'>{csp_meta()}<title>VQA Lab · {text(run)}</title>"
        f"<style>{_CSS}</style></head><body><h1>VQA Lab report · {text(run)}</h1>{summary}"
        f"<h2 id='results'>Results</h2>{_results(root)}{compared}"
        f"<h2 id='reproduction'>Reproduction: the papers beside this run</h2>{_reproduction(root)}"
        f"{agreed}{_contents(list(TITLES.items()), bool(compared), bool(agreed))}"
        f"{''.join(sections)}</body></html>"
    )
    # a stopped build leaves the previous report whole
    with atomic_file(out, "w", encoding="utf-8") as f:
        f.write(page)
    return out
