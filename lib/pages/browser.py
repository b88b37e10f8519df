"""The item browser: every answer of a run beside its image, question, options and reference.

    write_browser(run_folder)          # -> outputs/<run>/browser/index.html (stage 07 writes it)
    frame(run_folder, model="trained", outcome="invalid")     # the same rows in a notebook
    show(frame(...))                   # ... as a Styler with the thumbnails

The page is static and works from ``file://`` (no server, nothing fetched): ``index.html`` holds
the filters and the table; each dataset's rows are a script of their own under ``data/`` (loaded
when the filters ask for that dataset, so a Scrapbook set of tens of thousands of answers does not
slow the others), and each image is a thumbnail file under ``thumbs/`` (never inlined). A row is
one prediction: dataset, task, model, style, subset (the task's :meth:`~lib.tasks.Task.subset`),
question, options, reference, the model's raw answer, the answer read from it, the outcome
(right / wrong / invalid / truncated / error) and, where LAVE judged it, the rating and its
rationale. The filters live in the URL (``index.html#dataset=demo-mcq&model=trained``), so the
report links every headline number to the answers behind it (:func:`link`).

Given a comparison of another run (A) with this one (B) - :func:`lib.compare.changes.side_by_side`;
stage 07 passes it when its ``compare_with`` names a run - the page gains two filters: ``change``
(improved, worsened, mixed, same scores: :func:`lib.metrics.stats.score_change`) and ``cause`` (the
first step where the two answers part ways: dataset, prompt, model, reading, scoring), and
``significant`` (changed and significant after correction: the answer changed and a metric of its
group survives Holm's or Benjamini-Hochberg's correction across the comparison's rows). Under each changed
answer, both runs' prompt, raw reply, read answer, outcome and scores side by side, and what
explains the change (``index.html#cause=model&change=worsened``: the answers the model made worse).

Where stage 07 held the run's scorers to human labels (``human_labels``: :mod:`lib.pages.agreement_view`),
the labelled answers are rows too (dataset "human labels": people's verdicts, every scorer's score),
and the ``disagree`` filter shows those where a judge and the people disagree on a criterion
(``index.html#disagree=lave[judge] · correctness``).

Where stage 07 assessed the items (:mod:`lib.items.quality`), the ``flag`` filter shows the answers
to the items carrying a flag (``index.html#flag=agreed_wrong``: saturated, never right, negative
discrimination, agreed wrong, and any flag a further audit raises), read from its ``flags.csv``.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import shutil
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
from PIL import Image

from lib.core.paths import DATA
from lib.core.schema import ERROR, Item, Prediction
from lib.io import artifacts, item_index, read_items_at, read_jsonl, share_strings
from lib.items import quality
from lib.metrics.stats import CHANGES, score_change
from lib.pages import agreement_view
from lib.pages.render import write_page
from lib.tasks.registry import get_task

FOLDER = "browser"  # under the run folder
THUMB_PX = 160  # a thumbnail's longer side
FILTERS = ("dataset", "task", "model", "style", "subset", "outcome")
COMPARED = ("change", "cause", "significant")  # the filters a comparison adds
# significant: a changed answer whose group has a metric that survives the correction
CORRECTIONS = {"holm": "Holm", "bh": "Benjamini-Hochberg"}
DISAGREE = "disagree"  # the filter 07's agreement with human labels adds
FLAG = "flag"  # the filter 07's item quality adds: the flags an answer's item carries
KEY = ("dataset", "task", "model", "style", "item_id")  # one answer of a run
OUTCOMES = ("right", "wrong", "invalid", "truncated", "error")
PAGE_ROWS = 50
SCRIPT = DATA / "browser.js"  # the page's script (its template: lib/data/templates/browser.html)
COLUMNS = (
    "dataset",
    "task",
    "model",
    "style",
    "subset",
    "item_id",
    "question",
    "options",
    "reference",
    "raw",
    "parsed",
    "outcome",
    "rating",
    "rationale",
    "images",
)


def outcome(p: Prediction) -> str:
    """What became of an answer: a failed call (``error``), cut off by the token limit
    (``truncated``), unreadable (``invalid``), else ``right`` or ``wrong`` as scored."""
    if p.method == ERROR:
        return "error"
    if p.truncated:
        return "truncated"
    if not p.valid:
        return "invalid"
    return "right" if p.correct else "wrong"


def _judgements(folder: Path) -> dict[tuple, dict]:
    path = folder / artifacts.JUDGEMENTS
    return {
        (j["model"], j["meta"].get("dataset", ""), j["item_id"], j["meta"].get("style")): j
        for j in (read_jsonl(path) if path.exists() else ())
    }


def _items(config: dict, wanted: dict[str, set[str]]) -> dict[tuple[str, str], tuple[Path, Item]]:
    """(dataset, id) -> (dataset folder, item) for the ids the predictions name, read by seeking."""
    out = {}
    for name, ids in wanted.items():
        folder = Path(config["datasets"][name])
        offsets = item_index(folder, wanted=ids)
        for it in read_items_at(folder, offsets.values()):
            out[(name, it.id)] = (folder, it)
    return out


def evaluation_rows(folder: str | Path) -> list[dict]:
    """One row per prediction of an evaluation folder (a run's ``06_evaluate``; see the module
    docstring); images as paths."""
    folder = Path(folder)
    path = folder / artifacts.PREDICTIONS
    preds = (
        [Prediction.from_dict(share_strings(d, Prediction.REPEATED)) for d in read_jsonl(path)]
        if path.exists()
        else []
    )
    if not preds:
        return []
    config = json.loads((folder / artifacts.EVAL_CONFIG).read_text())
    wanted = defaultdict(set)
    for p in preds:
        wanted[p.dataset].add(p.item_id)
    items, judged = _items(config, wanted), _judgements(folder)
    out = []
    for p in preds:
        root, it = items[(p.dataset, p.item_id)]
        task = get_task(it.task)
        j = judged.get((p.model, p.dataset, p.item_id, p.style))
        out.append(
            {
                "dataset": p.dataset,
                "task": p.task,
                "model": p.model,
                "style": p.style,
                "subset": task.subset(it),
                "item_id": it.id,
                "question": it.question,
                "options": list(it.options or []),
                "reference": task.reader.target_text(it),
                "raw": p.raw if isinstance(p.raw, str) else json.dumps(p.raw),
                "parsed": task.reader.answer_text(it, p.parsed),
                "outcome": outcome(p),
                "rating": None if j is None else j["rating"],
                "rationale": "" if j is None else j["rationale"],
                "images": [str(root / im) for im in it.images],
            }
        )
    return out


def rows(run_folder: str | Path) -> list[dict]:
    """One row per prediction of the run's stage 06 (:func:`evaluation_rows`)."""
    return evaluation_rows(artifacts.stage_folder(run_folder, artifacts.EVALUATE))


def _finite(scores: dict) -> dict:
    """Scores a page can read as JSON (NaN and infinities as null)."""
    return {
        k: v if isinstance(v, (int, float)) and math.isfinite(v) else None
        for k, v in scores.items()
    }


def _side(comparison: dict, item: dict, side: int) -> tuple:
    """The answer of a changed item on one side (0: run A, -1: run B), as :data:`KEY` values: the
    group's own dimensions, and the filter's value for a dimension it maps (``--model a b``)."""
    group_by, filters = comparison["group_by"], comparison["filters"]
    return tuple(
        item["group"][group_by.index(d)] if d in group_by else filters[d][side] for d in KEY[:4]
    ) + (item["item_id"],)


def significant_groups(comparison: dict) -> dict[tuple, list[str]]:
    """Per group of the comparison, the corrections (:data:`CORRECTIONS`) under which one of its
    metrics' B - A survives (:func:`lib.eval.paired.adjust`): the ``significant`` filter."""
    out: dict[tuple, list[str]] = {}
    for m in comparison["metrics"]:
        named = out.setdefault(tuple(m["group"]), [])
        named += [n for k, n in CORRECTIONS.items() if m.get(k) and n not in named]
    return out


def compared_rows(table: list[dict], comparison: dict) -> list[dict]:
    """Run B's ``table`` with the comparison's fields: every row's ``cause`` and ``change`` (empty
    for an answer the comparison found unchanged) and, for a changed one, what explains it, both
    prompts and scores, and run A's answer (``other``: its model, style, raw reply, reading, outcome)."""
    theirs = {tuple(r[k] for k in KEY): r for r in evaluation_rows(comparison["A"])}
    changed = {_side(comparison, it, -1): it for it in comparison["items"]}
    out, kept = [], significant_groups(comparison)
    for r in table:
        it = changed.get(tuple(r[k] for k in KEY))
        if it is None:
            out.append({**r, "cause": "", "change": "", "significant": []})
            continue
        other = theirs.get(_side(comparison, it, 0))
        if other is None:
            raise ValueError(
                f"{comparison['A']}: no answer {_side(comparison, it, 0)} any more (the comparison is older "
                f"than its run A's predictions): compare the runs again"
            )
        prompts = it.get("prompt") or {}
        out.append(
            {
                **r,
                "cause": it["cause"],
                "change": it.get("change") or score_change(it["A"], it["B"]),
                "because": "; ".join(it["because"]),
                "significant": kept.get(tuple(it["group"]), []),
                "prompt": prompts.get("B", ""),
                "scores": _finite(it["B"]),
                "other": {
                    "model": other["model"],
                    "style": other["style"],
                    "prompt": prompts.get("A", ""),
                    "raw": other["raw"],
                    "parsed": other["parsed"],
                    "outcome": other["outcome"],
                    "scores": _finite(it["A"]),
                },
            }
        )
    return out


def run_label(folder: str | Path) -> str:
    """The name a reader knows an evaluation folder by: its run's, for a run's ``06_evaluate``."""
    folder = Path(folder)
    return folder.parent.name if folder.name == artifacts.EVALUATE else folder.name


def frame(run_folder: str | Path, **filters) -> pd.DataFrame:
    """The rows as a DataFrame, filtered by any of :data:`FILTERS` (``model="trained"``)."""
    unknown = set(filters) - set(FILTERS)
    if unknown:
        raise ValueError(f"unknown filter(s) {sorted(unknown)}; filters: {', '.join(FILTERS)}")
    df = pd.DataFrame(rows(run_folder), columns=COLUMNS)
    for k, v in filters.items():
        if v is not None:
            df = df[df[k] == v]
    return df.reset_index(drop=True)


def show(df: pd.DataFrame, max_rows: int = PAGE_ROWS):
    """A Styler of the first ``max_rows`` rows with each item's first image as a thumbnail (the
    rows' text escaped: a dataset's or a model's text never becomes markup in the notebook)."""
    df = df.head(max_rows).copy()
    df["image"] = [
        f'<img src="{html.escape(Path(ims[0]).as_uri())}" width="{THUMB_PX}">' if ims else ""
        for ims in df["images"]
    ]
    cols = [
        "image",
        "dataset",
        "model",
        "style",
        "question",
        "reference",
        "raw",
        "parsed",
        "outcome",
        "rating",
    ]
    # every cell is text from data, escaped; the thumbnails are the tags made just above
    return (
        df[cols]
        .style.format(escape="html")
        .format(lambda s: s, subset=["image"])
        .hide(axis="index")
    )


def _thumb(path: str, folder: Path, made: dict[str, str]) -> str:
    """The thumbnail of ``path`` under ``folder`` (made once per image), as a path relative to the page."""
    if path not in made:
        name = hashlib.sha1(path.encode()).hexdigest()[:16] + ".jpg"
        target = folder / "thumbs" / name
        if not target.exists():
            try:
                with Image.open(path) as im:
                    im = im.convert("RGB")
                    im.thumbnail((THUMB_PX, THUMB_PX))
                    im.save(target, quality=85)
            except OSError:
                name = ""  # a missing or unreadable image: the row says so instead of a thumbnail
        made[path] = f"thumbs/{name}" if name else ""
    return made[path]


def link(**filters) -> str:
    """The browser's address from the run folder (``browser/index.html#...``) showing the rows of
    ``filters`` (:data:`FILTERS`; :data:`COMPARED` where the browser holds a comparison,
    :data:`DISAGREE` where it holds labelled answers, :data:`FLAG` where stage 07 flagged items)."""
    known = FILTERS + COMPARED + (DISAGREE, FLAG)
    shown = {k: v for k, v in filters.items() if k in known and v is not None}
    return f"{FOLDER}/index.html" + (f"#{urlencode(shown)}" if shown else "")


def _compared(
    run_folder: Path, table: list[dict], comparison: dict | None
) -> tuple[list[dict], dict | None]:
    """The rows with the comparison's fields (:func:`compared_rows`) and what the page says of it
    (run A's name and the counts); the rows as they are without a comparison."""
    if comparison is None:
        return table, None
    ours = artifacts.stage_folder(run_folder, artifacts.EVALUATE)
    if Path(comparison["B"]).resolve() != ours.resolve():
        raise ValueError(
            f"the comparison's run B is {comparison['B']}, not this run's {ours}: compare this run "
            f"(B) with the other (artifacts)"
        )
    said = {
        "A": run_label(comparison["A"]),
        **{k: comparison[k] for k in ("paired", "changed", "only_A", "only_B")},
    }
    return compared_rows(table, comparison), said


def item_flags(run_folder: str | Path) -> tuple[dict[tuple[str, str], list[str]], list[str]]:
    """The :data:`FLAG` filter's data: per (dataset, item id) of this run the flags stage 07 found
    its item to carry (:mod:`lib.items.quality`'s ``flags.csv``), and every flag its audits raise
    (none where it assessed no items)."""
    summary = quality.read_summary(run_folder)
    flags = quality.read_table(run_folder, artifacts.ITEM_FLAGS)
    if summary is None or flags is None:
        return {}, []
    ours = {(d["dataset"], d["digest"]) for d in summary["datasets"] if d["ours"]}
    names = summary["flags"]
    mine = flags[[k in ours for k in zip(flags["dataset"], flags["digest"])]]
    marked = mine[names].to_numpy() == 1
    keys = zip(mine["dataset"], mine["item_id"])
    return {k: [n for n, on in zip(names, row) if on] for k, row in zip(keys, marked)}, names


def _filters(table: list[dict], comparison: dict | None, disagree: list[str], flags=()) -> tuple:
    """The page's filters (a comparison's, the labelled answers' and the items' flags where there
    are some) and every value each one offers."""
    filters = FILTERS + (COMPARED if comparison else ()) + ((DISAGREE,) if disagree else ())
    filters += (FLAG,) if flags else ()
    values = {k: sorted({str(r[k]) for r in table} - {""}) for k in FILTERS if k != "outcome"}
    values.update(
        {
            "outcome": list(OUTCOMES),
            "change": list(CHANGES),
            "cause": list(comparison["causes"]) if comparison else [],
            "significant": list(CORRECTIONS.values()),
            DISAGREE: disagree,
            FLAG: list(flags),
        }
    )
    return filters, values


def write_browser(run_folder: str | Path, comparison: dict | None = None) -> Path | None:
    """Write ``<run>/browser/`` (page, one data script per dataset, thumbnails); None when the run
    has no predictions. ``comparison``: another run (A) against this one (B), as
    :func:`lib.compare.changes.side_by_side` returns it, adds the change and cause filters. The folder
    is rebuilt whole each time."""
    run_folder = Path(run_folder)
    found = agreement_view.read_agreed(run_folder)
    labelled, disagree = agreement_view.browser_rows(found) if found else ([], [])
    table = rows(run_folder)
    if not table + labelled:
        return None
    table, said = _compared(run_folder, table, comparison)
    flagged, flags = item_flags(run_folder)
    if flags:
        table = [{**r, FLAG: flagged.get((r["dataset"], r["item_id"]), [])} for r in table]
    table += labelled
    folder = run_folder / FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "thumbs").mkdir(parents=True)
    (folder / "data").mkdir()
    made: dict[str, str] = {}
    by_dataset = defaultdict(list)
    for r in table:
        r = {**r, "images": [_thumb(im, folder, made) for im in r["images"]]}
        by_dataset[r["dataset"]].append(r)
    files = {}
    for i, (name, rs) in enumerate(sorted(by_dataset.items())):
        files[name] = f"data/{i}.js"
        # a script file, never read as HTML: JSON is JavaScript (ES2019), nothing in it to escape
        name_js, rows_js = (json.dumps(v, ensure_ascii=False) for v in (name, rs))
        (folder / files[name]).write_text(
            f"VQALAB.loaded({name_js}, {rows_js});\n", encoding="utf-8"
        )
    filters, values = _filters(table, comparison if said else None, disagree, flags)
    index = {
        "files": files,
        "counts": {k: len(v) for k, v in by_dataset.items()},
        "values": values,
        "filters": list(filters),
        "page_rows": PAGE_ROWS,
        "comparison": said,
    }
    shutil.copyfile(SCRIPT, folder / "browser.js")
    agreed = {"labelled": len(labelled), "dataset": agreement_view.DATASET} if disagree else None
    return write_page(
        folder / "index.html",
        "browser.html",
        run=run_folder.name,
        index=index,
        stale=artifacts.stale_tables(artifacts.stage_folder(run_folder, artifacts.EVALUATE)),
        compared=said,
        agreed=agreed,
        flags=[f.replace("_", " ") for f in flags],
    )
