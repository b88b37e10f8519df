"""The HTML report of a run: ``outputs/<run>/report.html``, self-contained (figures embedded as
base64 PNG) so it can be mailed. One section per stage, in order; a stage whose outputs are absent
gets a line saying so and why, instead of failing the report. The run's provenance (params, seeds,
models, git SHA) and the invalid-answer rates are part of it. Every stage's outputs are read
through :mod:`lib.artifacts`, the stages' published layout. 06's metric tables are shown only when
they come from its current predictions (:func:`lib.artifacts.stale_tables`); otherwise the section
says they are withheld, why, and how to recompute them, and the report's first lines say so too.
"""

from __future__ import annotations

import base64
import html
import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from lib import artifacts as A
from lib.io import atomic_file
from lib.paths import run_dir

TITLES = {
    A.SETUP: "Setup: models and probes",
    A.COLLECT: "Collect: images and manifest",
    A.ANNOTATE: "Annotate: annotations, agreement, style variants",
    A.AF: "Adversarial filtering of distractors",
    A.SCRAPBOOK: "Scrapbook: synthetic probing datasets",
    A.TRAIN: "Train: fine-tuning",
    A.EVALUATE: "Evaluate: predictions, metrics, Scrapbook protocol",
    A.ANALYZE: "Analyze: maps, topics, the papers' figures",
}
_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
h1{border-bottom:2px solid #444}h2{margin-top:2em;border-bottom:1px solid #bbb}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px}
img{max-width:min(100%,760px);margin:.5em 0;border:1px solid #eee}.absent{color:#a00}.prov{font-size:11px;color:#555}
details{margin:.3em 0}"""


DATA_TABLES = {"umap_images"}  # written for reuse; the report shows their figures instead


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(path.stem)}"><figcaption>{html.escape(path.stem)}</figcaption></figure>'


def _table(df: pd.DataFrame, title: str = "", max_rows: int = 60, index: bool = True) -> str:
    """An HTML table: counts as integers, other numbers to 3 decimals; a tidy frame without its
    row numbers (``index=False``)."""
    more = f"<p>({len(df) - max_rows} more rows in the CSV)</p>" if len(df) > max_rows else ""
    head = f"<h4>{html.escape(title)}</h4>" if title else ""
    df = df.head(max_rows).copy()
    for col in df.columns:
        values = df[col]
        if values.dtype.kind == "f" and values.notna().any() and (values.dropna() % 1 == 0).all() \
                and (values.dropna().abs() > 1).any():
            df[col] = values.astype("Int64")  # a column of counts, not 12.000
    return head + df.to_html(float_format=lambda v: f"{v:.3f}", na_rep="", border=0, index=index) + more


def _csv(path: Path, title: str, **kw) -> str:
    try:
        return _table(pd.read_csv(path, **kw), title, index=False)
    except (pd.errors.EmptyDataError, FileNotFoundError):
        return f"<p>{html.escape(title)}: empty</p>"


def _provenance(folder: Path) -> str:
    p = folder / A.PROVENANCE
    if not p.exists():
        return "<p class='prov'>no provenance.json</p>"
    prov = json.loads(p.read_text())
    git = prov.get("git", {})
    head = (f"created {prov.get('created', '?')} · git {str(git.get('sha', '?'))[:12]}"
            f"{' (dirty)' if git.get('dirty') else ''} · seed {prov.get('seed')}")
    return (f"<p class='prov'>{html.escape(head)}</p><details><summary>parameters</summary><pre>"
            f"{html.escape(json.dumps(prov.get('params', {}), indent=1, default=str))}</pre></details>")


def _figures(folder: Path) -> str:
    return "".join(_img(p) for p in sorted(folder.rglob("figures/*.png")))


def _withheld(why: str) -> str:
    """A section whose tables do not come from its current outputs: neither they nor the figures
    drawn from them are shown (they may be another run's numbers)."""
    return (f"<p class='absent'><b>Metrics withheld: stale or unverified tables.</b> {html.escape(why)}</p>"
            f"<p class='absent'>This section's figures are withheld with them.</p>")


def _stage_body(root: Path, stage: str, folder: Path) -> str:
    parts = []
    summary = A.read_summary(root, stage) or {}
    if stage == A.SETUP and summary:
        parts.append(f"<p>{summary['probe_answers']} probe answers from {summary['models']} models "
                     f"({summary['constrained_invalid']} constrained answers invalid); demo datasets: "
                     f"{html.escape(', '.join(summary['datasets']) or 'none')}.</p>")
        parts.append(_csv(folder / A.PROBE, "Probe answers"))
    if stage == A.COLLECT and (rep := A.read_json(root, stage, A.COLLECT_REPORT)):
        parts.append(f"<p>{rep['collected']} images collected, {len(rep['bad_files'])} bad files, "
                     f"{len(rep['duplicates'])} duplicates removed, {rep['kept']} kept.</p>")
    if stage == A.ANNOTATE:
        parts.append(_csv(folder / A.AGREEMENT, "Agreement per categorical field"))
    if stage == A.AF and summary:
        parts.append(f"<p>{summary['questions']} questions from {summary['skeletons']} skeletons, {summary['fooled']} "
                     f"fooled the discriminators, {summary['blind_answerable']} answerable without the image.</p>")
        if (folder / A.SHORTCUTS).exists():
            parts.append(_csv(folder / A.SHORTCUTS, "Shortcut audit: how often a text-only tell picks the answer, "
                                                    "beside chance (lib.metrics.shortcuts)"))
    if stage == A.SCRAPBOOK:
        for name, d in summary.get("datasets", {}).items():
            parts.append(f"<p>{html.escape(name)}: {d['images']} images, {d['questions']:,} questions</p>")
    if stage == A.TRAIN and summary:
        table = pd.DataFrame({k: summary[k] for k in ("majority", "base", "trained") if k in summary}).T
        parts.append(_table(table, f"Held-out accuracy ({summary.get('n_test')} questions, "
                                   f"{summary.get('train_seconds')} s of training)"))
    m = A.read_table(root, stage, A.METRICS) if stage == A.EVALUATE else None
    if m is not None:
        inv = m[m["metric"] == "invalid_rate"][["model", "dataset", "task", "style", "value", "n", "n_invalid",
                                              "n_truncated"]]
        parts.append(_table(inv.rename(columns={"value": "invalid_rate"}), "Invalid answers (kept raw, counted wrong) and answers cut off by the token limit"))
        head = m[m["subset"].isin(["all", "non-absurd"]) & (m["metric"] != "invalid_rate")]
        parts.append(_table(head.pivot_table(index=["dataset", "task", "metric"], columns=["model", "style"],
                                             values="value"), "Headline metrics", max_rows=80))
        parts.append(_csv(folder / A.ERRORS, "Scrapbook overall and error categories (errors.csv)"))
    if stage == A.ANALYZE:
        for p in sorted((folder / A.TABLES).glob("*.csv")):
            if p.stem not in DATA_TABLES:  # point coordinates are data for a figure, not a table to read
                parts.append(_csv(p, p.stem.replace("_", " ")))
    parts.append(_figures(folder))
    return "".join(parts)


def build_report(run: str | Path, out: Path | None = None) -> Path:
    """Write ``<run folder>/report.html`` from whatever stage outputs exist; returns its path.
    ``run`` is a run name (``outputs/<run>/``) or a run folder."""
    root = Path(run) if isinstance(run, Path) else run_dir(run)
    run = root.name
    out = out or root / A.REPORT
    sections, absent, stale = [], [], []
    for stage, title in TITLES.items():
        folder = A.stage_folder(root, stage)
        if not folder.is_dir() or not any(folder.iterdir()):
            why = "no outputs: the stage was not run for this run" if not folder.is_dir() else "its folder is empty"
            absent.append(stage)
            sections.append(f"<h2>{stage} · {html.escape(title)}</h2><p class='absent'>Absent - {why}.</p>")
            continue
        why = A.stale_tables(folder) if stage == A.EVALUATE else None
        if why:
            stale.append(stage)
        body = _withheld(why) if why else _stage_body(root, stage, folder)
        sections.append(f"<h2>{stage} · {html.escape(title)}</h2>{_provenance(folder)}{body}")
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    summary = (f"<p>Run <b>{html.escape(run)}</b>, report built {created}. Sections without outputs: "
               f"{', '.join(absent) or 'none'}.</p>")
    if stale:
        summary += (f"<p class='absent'><b>Stale results withheld</b> in {', '.join(stale)}: the tables do not come "
                    f"from the current predictions (see the section).</p>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>VQA Lab · {html.escape(run)}</title>"
            f"<style>{_CSS}</style></head><body><h1>VQA Lab report · {html.escape(run)}</h1>{summary}"
            f"{''.join(sections)}</body></html>")
    with atomic_file(out, "w", encoding="utf-8") as f:  # a stopped build leaves the previous report whole
        f.write(page)
    return out
