"""People review the flagged items in Label Studio, and their verdicts make a new dataset version.

    project = review_project(run_folder, "review/")               # then review it in Label Studio
    summary = apply_review("export.json", dataset_folder, "quiz-v2/")

:func:`review_project` reads a run's stage-07 item tables (``07_analyze/items/flags.csv`` and
``item_stats.csv``, :mod:`lib.items.quality`) and its datasets' folders (06's ``config.json``), and
writes, all or nothing, a Label Studio project into ``out``: ``review_config.xml`` (the labelling
config), ``review_tasks.json`` (one task per flagged item: its images as local-files URLs, the
question, the options, the current key, why it was flagged and the respondents' most common wrong
answer) and ``review_project.json`` (what was chosen, the document root and the ``storages`` to
connect, one per dataset's images: :func:`lib.io.labelstudio_files.served_folders`). Only items of
the dataset versions the run evaluated are offered: a dataset whose ``items.jsonl`` changed since
is refused, so no reviewer judges a question beside another question's key.

A reviewer gives each item one of :data:`lib.items.review_export.VERDICTS`: ``keep``; ``fix key`` with the right option(s)
chosen (an open question: the right answer written); ``rewrite`` with the corrected question;
``drop``. :func:`apply_review` reads Label Studio's JSON export of the project (within the labels
cap, every field it uses checked, an error as ``FILE: task N: field X: expected ..., got ...``;
a cancelled annotation says nothing, an annotator counts once, by the later annotation). An item's
verdict is the one most of its reviewers gave; a fix or a rewrite is then the answer or text most
of those reviewers gave. A tie (at either step) leaves the item unchanged and is counted, never
broken. The new version, written to a new folder (the original is never touched), holds the kept
items (fixed keys, rewritten questions; the dropped ones removed) with their images linked (a hard
link, else a copy), a ``dataset.json`` naming its ``parent`` (the original's digest), and
``changelog.jsonl`` and ``CHANGELOG.md``: per changed item its id, what changed (old -> new), why
(the flags it carried) and how many reviewers said so.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path
from xml.sax.saxutils import quoteattr

import pandas as pd

from lib.core.paths import NAME, outputs_root
from lib.core.schema import Item
from lib.io import (
    artifacts,
    aside_folder,
    check_ours,
    dataset_info,
    file_sha256,
    images_roots,
    link_or_copy,
    load_dataset_info,
    load_items,
    mark,
    save_dataset,
    swap_in,
    write_json,
    write_jsonl,
)
from lib.io.labelstudio_files import (
    annotator,
    exported_tasks,
    local_files_url,
    served_folders,
    task_where,
)
from lib.items.bank import ITEM
from lib.items.quality import read_table
from lib.items.review_export import ANSWER, FIX, REWRITE, VERDICTS, ReviewError, check, decide, vote
from lib.tasks.registry import get_task

KIND, VERSION_KIND = "item review", "reviewed dataset"  # the output folders' markers
CONFIG, TASKS, PROJECT = "review_config.xml", "review_tasks.json", "review_project.json"
CHANGELOG, CHANGES = "changelog.jsonl", "CHANGELOG.md"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def review_config() -> str:
    """The labelling config: the item's images, question, options, key, flags and most common
    wrong answer; the verdict (required), and the fields each verdict needs, shown with it."""
    shown = (("Question", "question"), ("Options", "options"), ("Current key", "key"))
    shown += (("Why it was flagged", "why"), ("Most common wrong answer", "wrong"))
    parts = ["<View>", '  <Image name="images" valueList="$images"/>']
    for header, name in shown:
        parts += [
            f"  <Header value={quoteattr(header)}/>",
            f'  <Text name="{name}" value="${name}"/>',
        ]
    choices = "".join(f"<Choice value={quoteattr(v)}/>" for v in VERDICTS)
    when = 'visibleWhen="choice-selected" whenTagName="verdict" whenChoiceValue='
    parts += [
        '  <Header value="Verdict"/>',
        f'  <Choices name="verdict" toName="question" choice="single" required="true">{choices}'
        "</Choices>",
        f'  <View {when}"fix key">',
        '    <Header value="The right option(s)"/>',
        f'    <Choices name="{FIX}" toName="question" choice="multiple" value="$option_choices"/>',
        '    <Header value="An open question: the right answer"/>',
        f'    <TextArea name="{ANSWER}" toName="question" maxSubmissions="1"/>',
        "  </View>",
        f'  <View {when}"rewrite">',
        '    <Header value="The corrected question"/>',
        f'    <TextArea name="{REWRITE}" toName="question" maxSubmissions="1"/>',
        "  </View>",
        "</View>",
    ]
    return "\n".join(parts) + "\n"


def _option(i: int, text: str) -> str:
    return f"{LETTERS[i] if i < len(LETTERS) else i + 1}. {text}"


def _key_text(it: Item) -> str:
    if it.options is None:
        return "\n".join(map(str, it.answer))
    return "\n".join(_option(i, it.options[i]) for i in it.answer) or "(none of the options)"


def _wrong_text(it: Item, task: str, wrong) -> str:
    """The most common wrong answer as a reader sees it (stored as the task's JSON)."""
    if wrong is None or pd.isna(wrong) or wrong == "":
        return "(none)"
    try:
        return get_task(task).reader.answer_text(it, json.loads(wrong)) or str(wrong)
    except (ValueError, KeyError, TypeError, IndexError):
        return str(wrong)


def _run_folder(run: str | Path) -> Path:
    """A run folder from a run name, a run folder, its 06/07 folder or its flags.csv."""
    path = Path(run)
    if not path.exists() and NAME.fullmatch(str(run)):
        path = outputs_root() / str(run)
    if path.is_file():
        path = path.parent.parent.parent  # <run>/07_analyze/items/flags.csv
    if path.name in (artifacts.EVALUATE, artifacts.ANALYZE):
        path = path.parent
    return path


def _flagged(run: Path, flags: tuple[str, ...]) -> tuple[pd.DataFrame, list[str]]:
    """The run's flagged items carrying any of ``flags`` (none named: any flag), with their
    statistics; and the flags looked at."""
    table = read_table(run, artifacts.ITEM_FLAGS)
    stats = read_table(run, artifacts.ITEM_STATS)
    if table is None or stats is None:
        raise ReviewError(
            f"{run}: no {artifacts.ITEM_FLAGS} and {artifacts.ITEM_STATS} under "
            f"{artifacts.ANALYZE}/ (run stage 07 first)"
        )
    known = [c for c in table.columns if c not in (*ITEM, "task")]
    unknown = [f for f in flags if f not in known]
    if unknown:
        raise ReviewError(f"--flag {', '.join(unknown)}: not a flag of {run} ({', '.join(known)})")
    chosen = list(flags) or known
    table = table[table[chosen].fillna(0).astype(int).any(axis=1)] if chosen else table[:0]
    extra = ["wrong_answer", "wrong_share", "n", "p"]
    stats = stats[[*ITEM, *[c for c in extra if c in stats.columns]]]
    return table.merge(stats, on=list(ITEM), how="left"), chosen


def _datasets(run: Path, table: pd.DataFrame) -> dict[str, tuple[Path, str]]:
    """name -> (folder, digest) of the datasets the flagged items come from, as the run's 06 named
    them; a dataset whose items changed since its evaluation is refused."""
    config = artifacts.read_json(run, artifacts.EVALUATE, artifacts.EVAL_CONFIG) or {}
    found = {}
    for name, digests in table.groupby("dataset")["digest"]:
        folder = config.get("datasets", {}).get(name)
        if folder is None:
            raise ReviewError(f"{run}: its 06 {artifacts.EVAL_CONFIG} names no dataset {name!r}")
        digest = file_sha256(Path(folder) / "items.jsonl", remember=False)
        if digest not in set(digests):
            raise ReviewError(
                f"{folder}: its items.jsonl is not the version {run.name} evaluated (digest "
                f"{str(digest)[:12]}, flagged: {', '.join(d[:12] for d in set(digests))}); "
                "review the run that evaluated it"
            )
        found[name] = (Path(folder), digest)
    return found


def _rows(table: pd.DataFrame, datasets: dict, chosen: list[str]) -> list[dict]:
    """One review row per flagged item of the evaluated versions: its task data, images as paths."""
    rows = []
    for name, (folder, digest) in datasets.items():
        part = table[(table["dataset"] == name) & (table["digest"] == digest)]
        items = {it.id: it for it in load_items(folder)}
        for _, r in part.iterrows():
            it = items.get(r["item_id"])
            if it is None:
                raise ReviewError(f"{folder}: flagged item {r['item_id']!r} is not in it")
            why = [f for f in chosen if int(r[f] or 0)]
            rows.append(
                {
                    "review_id": f"{name}:{it.id}",
                    **{"dataset": name, "digest": digest, "item_id": it.id, "task": it.task},
                    "flags": why,
                    "paths": [str(folder / im) for im in it.images],
                    "question": it.question,
                    "options": "\n".join(_option(i, o) for i, o in enumerate(it.options or [])),
                    "option_choices": [
                        {"value": _option(i, o)} for i, o in enumerate(it.options or [])
                    ],
                    "key": _key_text(it),
                    "why": ", ".join(f.replace("_", " ") for f in why),
                    "wrong": _wrong_text(it, r["task"], r.get("wrong_answer")),
                }
            )
    return rows


def review_project(
    run_or_flags: str | Path, out: str | Path, flags=(), limit: int | None = None, seed: int = 0
) -> dict:
    """Write the review project of a run's flagged items into ``out`` (built aside, swapped in
    whole; a folder of another kind is refused); ``flags``: only items carrying one of these
    (none: any flag); ``limit``: at most this many, a sample shuffled by ``seed``. Returns the
    project's description (``review_project.json``)."""
    run, out = _run_folder(run_or_flags), Path(out)
    check_ours(out, KIND)
    table, chosen = _flagged(run, tuple(flags))
    rows = _rows(table, _datasets(run, table), chosen) if len(table) else []
    if not rows:
        raise ReviewError(
            f"{run}: no item carries {', '.join(chosen) or 'a flag'}: nothing to review"
        )
    rows.sort(key=lambda r: r["review_id"])
    random.Random(seed).shuffle(rows)
    shown = rows[:limit]
    images = [{"dataset": r["dataset"], "image": p} for r in shown for p in r["paths"]]
    if not images:
        raise ReviewError(f"{run}: the flagged items have no images to show")
    root, storages = served_folders(images)
    tasks = [
        {"data": {k: v for k, v in r.items() if k != "paths"} | {"images": urls}}
        for r in shown
        for urls in [[local_files_url(p, root) for p in r["paths"]]]
    ]
    project = {
        "run": str(run),
        "flags": chosen,
        "seed": seed,
        "available": len(rows),
        "items": len(shown),
        "datasets": {r["dataset"]: r["digest"] for r in shown},
        "document_root": str(root),
        "storages": [str(s) for s in storages],
    }
    building = aside_folder(out)
    (building / CONFIG).write_text(review_config())
    write_json(building / TASKS, tasks)
    write_json(building / PROJECT, project)
    mark(building, KIND)
    swap_in(building, out)
    return project


def _verdicts(path: Path, items: dict[str, Item], digest: str) -> tuple[dict, Counter]:
    """item id -> (its task's data, the decision of :func:`lib.items.review_export.decide`) for the export's tasks on
    this dataset version, and the counts of what was left out."""
    exported, left, decided = exported_tasks(path), Counter(), {}
    for i, task in enumerate(exported):
        where = task_where(path, i, task)
        check(task, where)
        data = task["data"]
        if data["digest"] != digest:
            left["other_versions"] += 1
            continue
        item = items.get(data["item_id"])
        if item is None:
            raise ReviewError(f"{where}: item {data['item_id']!r} is not in this dataset version")
        if data["item_id"] in decided:
            raise ReviewError(f"{where}: item {data['item_id']!r} is reviewed by two tasks")
        votes = {}
        annotations = sorted(task.get("annotations") or [], key=lambda a: a.get("id") or 0)
        for a in (a for a in annotations if not a.get("was_cancelled")):
            if (said := vote(a, data, item, where)) is not None:
                votes[str(annotator(a))] = said
        decided[data["item_id"]] = (data, decide(votes), len(votes))
        if isinstance(decided[data["item_id"]][1], str):
            left[decided[data["item_id"]][1]] += 1
    if not decided:
        raise ReviewError(
            f"{path}: none of its {len(exported)} tasks reviews this dataset version "
            f"(digest {digest[:12]})"
        )
    return decided, left


def _change(item: Item, verdict: str, what) -> tuple[Item | None, str, str, str] | None:
    """``(the item after the verdict or None when dropped, what changed, old, new)``; None where
    the verdict changes nothing (keep, a fix to the same key, a rewrite to the same text)."""
    if verdict == "drop":
        return None, "dropped", item.question, ""
    if verdict == "rewrite" and what != item.question:
        new = replace(item, question=what)
        return new, "question", item.question, what
    if verdict == "fix key" and list(what) != list(item.answer):
        new = replace(item, answer=list(what))
        return new, "key", _key_text(item), _key_text(new)
    return None


def revised(items: list[Item], decided: dict) -> tuple[list[Item], list[dict]]:
    """The items after the verdicts (dropped ones removed) and one changelog row per change."""
    kept, log = [], []
    for item in items:
        data, decision, voters = decided.get(item.id, (None, "unreviewed", 0))
        change = None if isinstance(decision, str) else _change(item, *decision[:2])
        if change is None:
            kept.append(item)
            continue
        new, what, old, to = change
        kept += [new] if new is not None else []
        log.append(
            {
                "item_id": item.id,
                "verdict": decision[0],
                "change": what,
                "old": old,
                "new": to,
                "why": list(data["flags"]),
                "reviewers": decision[2],
                "of": voters,
            }
        )
    return kept, log


def _link_images(items: list[Item], source: Path, building: Path) -> list[Item]:
    """Each image inside the original folder linked (a hard link, else a copy) at its place in the
    new one; an image outside it (an ``images_roots`` folder) kept where it is, by its full path."""
    source, done, moved = source.resolve(), set(), []
    for it in items:
        paths = []
        for im in it.images:
            src = (source / im).resolve()
            if not src.is_relative_to(source):
                paths.append(str(src))
                continue
            paths.append(im)
            if im not in done:
                dst = building / im
                dst.parent.mkdir(parents=True, exist_ok=True)
                link_or_copy(src, dst)
                done.add(im)
        moved.append(replace(it, images=paths) if paths != it.images else it)
    return moved


def changelog_markdown(name: str, parent: str, log: list[dict], counts: dict) -> str:
    """``CHANGELOG.md``: the version's parent, what was left out, and a row per changed item."""
    lines = [
        f"# {name}: changes from review",
        "",
        f"Parent: `{parent}` (the SHA-256 of its items.jsonl). {len(log)} item(s) changed; "
        + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()),
        "",
        "| item | change | old | new | why (flags) | reviewers |",
        "|---|---|---|---|---|---|",
    ]
    cell = lambda text: str(text).replace("|", "\\|").replace("\n", "<br>")
    for r in log:
        lines.append(
            f"| {cell(r['item_id'])} | {r['change']} | {cell(r['old'])} | {cell(r['new'])} | "
            f"{', '.join(r['why'])} | {r['reviewers']} of {r['of']} |"
        )
    return "\n".join(lines) + "\n"


def apply_review(
    export_path: str | Path, dataset_folder: str | Path, out_folder: str | Path
) -> dict:
    """Write the new version of ``dataset_folder`` that the review export's verdicts make into
    ``out_folder`` (a new or empty folder, or an earlier such version; built aside, swapped in
    whole; the original folder is only read). Returns the summary written in ``dataset.json``'s
    ``review``: the export, the counts and the changes."""
    export, source, out = Path(export_path), Path(dataset_folder), Path(out_folder)
    if out.resolve() == source.resolve() or out.resolve().is_relative_to(source.resolve()):
        raise ReviewError(f"{out}: the new version must be written outside {source}")
    check_ours(out, VERSION_KIND)
    digest = file_sha256(source / "items.jsonl", remember=False)
    if digest is None:
        raise ReviewError(f"{source}: not a dataset folder (no items.jsonl)")
    items = load_items(source)
    decided, left = _verdicts(export, {it.id: it for it in items}, digest)
    kept, log = revised(items, decided)
    counts = {"reviewed": len(decided), "changed": len(log)}
    counts |= {k: left[k] for k in ("tied", "unreviewed", "other_versions")}
    old = load_dataset_info(source) if (source / "dataset.json").exists() else {}
    name = old.get("name", source.name)
    building = aside_folder(out)
    kept = _link_images(kept, source, building)
    review = {"export": str(export.resolve()), **counts}
    info = dataset_info(
        name,
        version=f"{old.get('version', '1')}+review",
        license=old.get("license", "unspecified"),
        provenance={**old.get("provenance", {}), "review": review},
        parent={"digest": digest, "folder": str(source.resolve()), "version": old.get("version")},
        images_roots=images_roots(kept, out),
    )
    save_dataset(building, kept, info)
    write_jsonl(building / CHANGELOG, log)
    (building / CHANGES).write_text(changelog_markdown(name, digest, log, counts))
    mark(building, VERSION_KIND)
    swap_in(building, out)
    return {**review, "items": len(kept), "parent": digest, "changes": log}
