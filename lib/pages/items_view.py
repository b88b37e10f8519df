"""What a reader sees of stage 07's item quality (:mod:`lib.items.quality`, under
``07_analyze/items/``): the report's section "Item quality" (:func:`section`) - per dataset version
its items, respondents, difficulty and flag counts (each count of this run's datasets linked to
those items in the item browser), each audit's sentence (a 2PL fit, or why there is none), the
figures, then per flag the flagged items of this run with their images, question, key and the most
common wrong answer with its share, :data:`SHOWN_PER_FLAG` at most, "and N more" linked to the
browser (whose ``flag`` filter is :func:`lib.pages.browser.item_flags`'s), and the image copies
across datasets side by side (:func:`_leak_pairs`). Every flag an audit raises is
shown the same way: a further audit adds its flags to ``flags.csv`` and they appear here.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pandas as pd
from PIL import Image

from lib.io import artifacts, item_index, read_items_at
from lib.items import quality
from lib.items.bank import ITEM
from lib.pages import browser
from lib.pages.render import Link, table
from lib.tasks.registry import get_task

HEADING = "Item quality: which items are good"
ANCHOR = "items"  # the report's section id
SHOWN_PER_FLAG = (
    6  # flagged items shown with their images per flag; the rest are counted and linked
)
THUMB_PX = 96  # an item's thumbnail in the report (embedded: the report is one file)


def _thumb(path: Path) -> str:
    """A JPEG thumbnail of the image at ``path`` as base64, empty where it cannot be read."""
    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            im.thumbnail((THUMB_PX, THUMB_PX))
            buf = io.BytesIO()
            im.save(buf, "JPEG", quality=80)
    except OSError:
        return ""
    return base64.b64encode(buf.getvalue()).decode()


def _items(run_folder: Path, wanted: pd.DataFrame) -> dict[tuple[str, str], tuple[Path, object]]:
    """(dataset, id) -> (dataset folder, item) of this run's stage 06, for the items ``wanted``."""
    config = artifacts.read_json(run_folder, artifacts.EVALUATE, artifacts.EVAL_CONFIG) or {}
    out = {}
    for name, ids in wanted.groupby("dataset")["item_id"]:
        folder = Path(config.get("datasets", {}).get(name, ""))
        if not (folder / "items.jsonl").exists():
            continue
        offsets = item_index(folder, wanted=set(ids))
        out.update({(name, it.id): (folder, it) for it in read_items_at(folder, offsets.values())})
    return out


def _shown(row: pd.Series, found: dict) -> dict:
    """One flagged item as the section shows it: thumbnails, question, options, key, the most
    common wrong answer and its share."""
    folder, it = found.get((row["dataset"], row["item_id"]), (None, None))
    task = get_task(row["task"])
    wrong = "" if pd.isna(row["wrong_answer"]) else row["wrong_answer"]
    wrong_text = (
        task.reader.answer_text(it, json.loads(wrong)) if wrong and it is not None else wrong
    )
    return {
        "dataset": row["dataset"],
        "item_id": row["item_id"],
        "images": [t for im in (it.images if it else []) if (t := _thumb(folder / im))],
        "question": it.question if it else "(the item is no longer in its dataset folder)",
        "options": list(it.options or []) if it else [],
        "key": task.reader.target_text(it) if it else "",
        "wrong": wrong_text,
        "wrong_share": "" if pd.isna(row["wrong_share"]) else f"{row['wrong_share']:.0%}",
        "right": round(row["p"] * row["n"]),
        "n": int(row["n"]),
    }


def _flagged(run_folder: Path, summary: dict, has_items: bool) -> list[dict]:
    """Per flag: this run's items carrying it, the first :data:`SHOWN_PER_FLAG` shown (most
    respondents first), how many more, and the browser's link to all of them."""
    flags = quality.read_table(run_folder, artifacts.ITEM_FLAGS)
    stats = quality.read_table(run_folder, artifacts.ITEM_STATS)
    ours = {(d["dataset"], d["digest"]) for d in summary["datasets"] if d["ours"]}
    if flags is None or stats is None or not ours:
        return []
    flags = flags[[k in ours for k in zip(flags["dataset"], flags["digest"])]]
    flags = flags.merge(stats.drop(columns=["task", *summary["flags"]]), on=list(ITEM))
    order = ["n", "wrong_share", "dataset", "item_id"]
    out = []
    for name in summary["flags"]:
        part = flags[flags[name] == 1].sort_values(order, ascending=[False, False, True, True])
        if not len(part):
            continue
        head = part.head(SHOWN_PER_FLAG)
        found = _items(run_folder, head)
        out.append(
            {
                "flag": name,
                "label": name.replace("_", " "),
                "total": len(part),
                "rows": [_shown(r, found) for _, r in head.iterrows()],
                "more": len(part) - len(head),
                "link": browser.link(flag=name) if has_items else "",
            }
        )
    return out


def _counts(run_folder: Path, summary: dict, has_items: bool) -> dict | None:
    """Per dataset version: items, respondents, quartiles of the share right, flag counts (this
    run's linked to the browser) and each audit's status."""
    datasets = quality.read_table(run_folder, artifacts.ITEM_DATASETS)
    if datasets is None or not len(datasets):
        return None
    ours = {(d["dataset"], d["digest"]) for d in summary["datasets"] if d["ours"]}
    shown = datasets.assign(
        run=[
            "this run" if k in ours else "compared" for k in zip(datasets.dataset, datasets.digest)
        ],
        digest=datasets["digest"].str[:12],
    )
    for name in summary["flags"]:
        shown[name] = [
            Link(browser.link(dataset=d, flag=name), str(int(n)))
            if has_items and n and r == "this run"
            else int(n)
            for d, n, r in zip(shown["dataset"], shown[name], shown["run"])
        ]
    status = [c for c in ("irt", "subset") if c in shown]
    first = ["dataset", "digest", "run", "items", "respondents", "p_q1", "p_median", "p_q3"]
    return table(
        shown[[*first, *summary["flags"], *status]],
        "Per dataset version: items, respondents (model x style x run), the share right per item "
        "(quartiles), how many items carry each flag (a count opens them in the item browser) "
        "and whether a 2PL fit and a subset check were made",
        max_rows=len(shown),
        index=False,
        csv=f"{artifacts.ANALYZE}/{artifacts.ITEM_DATASETS}",
    )


def _leak_pairs(run_folder: Path) -> dict | None:
    """The image copies across datasets (``items/leaks.csv``, :func:`lib.items.audits.leaks`) side
    by side: the first :data:`SHOWN_PER_FLAG` pairs, closest first, and how many more."""
    pairs = quality.read_table(run_folder, f"{artifacts.ITEMS}/leaks.csv")
    if pairs is None or not len(pairs):
        return None
    pairs = pairs.sort_values(["difference", "distance", "a", "b"])
    rows = [
        {
            "images": [_thumb(Path(r["a"])), _thumb(Path(r["b"]))],
            "datasets": f"{r['dataset_a']} · {r['dataset_b']}",
            "names": f"{Path(r['a']).name} · {Path(r['b']).name}",
            "kind": r["kind"],
            "distance": int(r["distance"]),
            "difference": f"{r['difference']:.1f}",
        }
        for _, r in pairs.head(SHOWN_PER_FLAG).iterrows()
    ]
    csv = f"{artifacts.ANALYZE}/{artifacts.ITEMS}/leaks.csv"
    return {"rows": rows, "total": len(pairs), "more": len(pairs) - len(rows), "csv": csv}


def _figures(run_folder: Path, shown: set[str]) -> list[dict]:
    folder = artifacts.stage_folder(run_folder, artifacts.ANALYZE) / artifacts.ITEMS
    out = []
    for p in sorted((folder / artifacts.FIGURES).glob("*.png")):
        shown.add(p.stem)  # the stage's own section does not show them again
        out.append({"png": base64.b64encode(p.read_bytes()).decode(), "name": p.stem})
    return out


def _said(summary: dict) -> list[dict]:
    """Each audit's sentences, once for all the dataset versions they are said of alike."""
    alike: dict[tuple, list[str]] = {}
    for d in summary["datasets"]:
        alike.setdefault(tuple(d["said"]), []).append(f"{d['dataset']} ({d['digest'][:12]})")
    return [{"datasets": names, "notes": list(notes)} for notes, names in alike.items()]


def section(run_folder: str | Path, shown: set[str] | None = None) -> dict | None:
    """The report's "Item quality" section; None (no section) where stage 07 wrote no item
    quality. ``shown``: the figures' names, added so the report shows each once."""
    run_folder = Path(run_folder)
    summary = quality.read_summary(run_folder)
    if summary is None:
        return None
    said = {"heading": HEADING, "anchor": ANCHOR}
    if summary.get("withheld"):
        return said | {"withheld": summary["withheld"]}
    has_items = (run_folder / browser.FOLDER / "index.html").exists()
    cards = artifacts.stage_folder(run_folder, artifacts.ANALYZE) / artifacts.ITEM_CARDS
    return said | {
        "runs": summary["runs"],
        "counts": _counts(run_folder, summary, has_items),
        "said": _said(summary),
        "figures": _figures(run_folder, set() if shown is None else shown),
        "flagged": _flagged(run_folder, summary, has_items),
        "leaks": _leak_pairs(run_folder),
        "shown_per_flag": SHOWN_PER_FLAG,
        "cards": [
            f"{artifacts.ANALYZE}/{artifacts.ITEM_CARDS}/{p.name}"
            for p in sorted(cards.glob("*.md"))
        ],
    }
