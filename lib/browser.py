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
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
from PIL import Image

from lib import artifacts as A
from lib.htmlsafe import csp_meta, json_block, json_text, text
from lib.io import atomic_file, item_index, read_items_at
from lib.schema import ERROR, Item, Prediction
from lib.families import get_task

FOLDER = "browser"  # under the run folder
THUMB_PX = 160  # a thumbnail's longer side
FILTERS = ("dataset", "task", "model", "style", "subset", "outcome")
OUTCOMES = ("right", "wrong", "invalid", "truncated", "error")
PAGE_ROWS = 50
_TEMPLATE = Path(__file__).parent / "data" / "browser.html"  # and browser.js beside it
COLUMNS = ("dataset", "task", "model", "style", "subset", "item_id", "question", "options", "reference", "raw", "parsed",
           "outcome", "rating", "rationale", "images")


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


def _judgements(run_folder: Path) -> dict[tuple, dict]:
    return {(j["model"], j["meta"].get("dataset", ""), j["item_id"], j["meta"].get("style")): j
            for j in A.read_records(run_folder, A.EVALUATE, A.JUDGEMENTS)}


def _items(config: dict, wanted: dict[str, set[str]]) -> dict[tuple[str, str], tuple[Path, Item]]:
    """(dataset, id) -> (dataset folder, item) for the ids the predictions name, read by seeking."""
    out = {}
    for name, ids in wanted.items():
        folder = Path(config["datasets"][name])
        offsets = item_index(folder, wanted=ids)
        for it in read_items_at(folder, offsets.values()):
            out[(name, it.id)] = (folder, it)
    return out


def rows(run_folder: str | Path) -> list[dict]:
    """One row per prediction of the run's stage 06 (see the module docstring); images as paths."""
    run_folder = Path(run_folder)
    preds = [Prediction.from_dict(d) for d in A.read_records(run_folder, A.EVALUATE, A.PREDICTIONS)]
    if not preds:
        return []
    config = A.read_json(run_folder, A.EVALUATE, A.EVAL_CONFIG)
    wanted = defaultdict(set)
    for p in preds:
        wanted[p.dataset].add(p.item_id)
    items, judged = _items(config, wanted), _judgements(run_folder)
    out = []
    for p in preds:
        folder, it = items[(p.dataset, p.item_id)]
        task = get_task(it.task)
        j = judged.get((p.model, p.dataset, p.item_id, p.style))
        out.append({"dataset": p.dataset, "task": p.task, "model": p.model, "style": p.style,
                    "subset": task.subset(it), "item_id": it.id, "question": it.question,
                    "options": list(it.options or []), "reference": task.target_text(it),
                    "raw": p.raw if isinstance(p.raw, str) else json.dumps(p.raw),
                    "parsed": task.answer_text(it, p.parsed), "outcome": outcome(p),
                    "rating": None if j is None else j["rating"], "rationale": "" if j is None else j["rationale"],
                    "images": [str(folder / im) for im in it.images]})
    return out


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
    df["image"] = [f'<img src="{text(Path(ims[0]).as_uri())}" width="{THUMB_PX}">' if ims else "" for ims in df["images"]]
    cols = ["image", "dataset", "model", "style", "question", "reference", "raw", "parsed", "outcome", "rating"]
    # every cell is text from data, escaped; the thumbnails are the tags made just above
    return df[cols].style.format(escape="html").format(lambda s: s, subset=["image"]).hide(axis="index")


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
    """The browser's address from the run folder (``browser/index.html#...``) showing the rows of ``filters``."""
    shown = {k: v for k, v in filters.items() if k in FILTERS and v is not None}
    return f"{FOLDER}/index.html" + (f"#{urlencode(shown)}" if shown else "")


def write_browser(run_folder: str | Path) -> Path | None:
    """Write ``<run>/browser/`` (page, one data script per dataset, thumbnails); None when the run
    has no predictions. The folder is rebuilt whole each time."""
    run_folder = Path(run_folder)
    table = rows(run_folder)
    if not table:
        return None
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
        (folder / files[name]).write_text(f"VQALAB.loaded({json_text(name)}, {json_text(rs)});\n", encoding="utf-8")
    values = {k: sorted({str(r[k]) for r in table}) for k in FILTERS if k != "outcome"}
    index = {"files": files, "counts": {k: len(v) for k, v in by_dataset.items()}, "values": values,
             "outcomes": list(OUTCOMES), "filters": list(FILTERS), "page_rows": PAGE_ROWS}
    shutil.copyfile(_TEMPLATE.with_suffix(".js"), folder / "browser.js")
    why = A.stale_tables(A.stage_folder(run_folder, A.EVALUATE))
    fill = {"csp": csp_meta(scripts=True, images="'self'"), "run": text(run_folder.name), "index": json_block("index", index),
            "stale": f'<p id="stale" class="stale"><b>These answers are not the ones the report\'s metrics were computed '
                     f'from.</b> {text(why)}</p>' if why else ""}
    page = re.sub(r"\{\{(\w+)\}\}", lambda m: fill[m.group(1)], _TEMPLATE.read_text())  # one pass: data never re-read
    with atomic_file(folder / "index.html", "w", encoding="utf-8") as f:
        f.write(page)
    return folder / "index.html"
