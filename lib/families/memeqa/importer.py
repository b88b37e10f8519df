"""MemeQA JSON splits: read, checked, imported as Items, exported."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from lib.core.schema import Item
from lib.families.memeqa.task import MultipleChoice
from lib.io import write_json

MEMEQA_KEYS = ("id", "img", "question", "options", "general_type", "specific_type", "answer_key")


def _check_img(r: dict, where: str) -> None:
    """A record's ``img``: a file name inside the split's images folder (readers join it there)."""
    img = PurePosixPath(r["img"].replace("\\", "/"))
    if not r["img"] or img.is_absolute() or ".." in img.parts or re.match(r"^[A-Za-z]:", r["img"]):
        # readers join img to the split's images folder: it must stay inside that folder
        raise ValueError(
            f"{where}: img must be a file name inside the images folder, got {r['img'][:200]!r}"
        )


def _check_answer_key(r: dict, where: str) -> None:
    """A record's ``answer_key`` against its options: an index (single) or one 0/1 flag per option
    (multi), as its ``general_type`` says."""
    opts = r["options"]
    if r["general_type"] == "single":
        ok = (
            isinstance(r["answer_key"], int)
            and not isinstance(r["answer_key"], bool)
            and 0 <= r["answer_key"] < len(opts)
        )
    elif r["general_type"] == "multi":
        ok = (
            isinstance(r["answer_key"], list)
            and len(r["answer_key"]) == len(opts)
            and all(f in (0, 1, True, False) for f in r["answer_key"])
        )
    else:
        raise ValueError(
            f"{where}: general_type must be 'single' or 'multi', got {r['general_type']!r}"
        )
    if not ok:
        raise ValueError(
            f"{where}: answer_key {r['answer_key']!r} does not fit {len(opts)} options "
            f"({'an index' if r['general_type'] == 'single' else 'one 0/1 flag per option'})"
        )


def _check_record(r, where: str) -> None:
    """One record of a split: an object with every key, each value of its type, ``img`` inside the
    images folder, the answer key fitting the options."""
    if not isinstance(r, dict):
        raise ValueError(f"{where}: a record is a JSON object, got {type(r).__name__}")
    missing = [k for k in MEMEQA_KEYS if k not in r]
    if missing:
        raise ValueError(f"{where} lacks key(s) {missing}")
    for key in ("img", "question", "specific_type"):
        if not isinstance(r[key], str):
            raise ValueError(f"{where}: {key} must be a string, got {r[key]!r}")
    if not isinstance(r["id"], (str, int)) or isinstance(r["id"], bool):
        raise ValueError(f"{where}: id must be a string, got {r['id']!r}")
    _check_img(r, where)
    opts = r["options"]
    if not isinstance(opts, list) or len(opts) < 2 or not all(isinstance(o, str) for o in opts):
        raise ValueError(f"{where}: options must be a list of at least 2 strings, got {opts!r}")
    _check_answer_key(r, where)


def read_memeqa(path: str | Path) -> list[dict]:
    """The records of a MemeQA split (a JSON list with keys id, img, question, options, general_type,
    specific_type, answer_key), each checked - keys, value types, the answer key against the
    options - so every MemeQA reader (this importer, 03's skeletons, 01's collector) refuses the
    same bad record with the same message naming the file and the record."""
    path = Path(path)
    try:
        records = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(records, list):
        raise ValueError(
            f"{path}: a MemeQA split is a JSON list of records, got {type(records).__name__}"
        )
    for n, r in enumerate(records):
        _check_record(
            r, f"{path}: record {n} (id={r.get('id') if isinstance(r, dict) else None!r})"
        )
    return records


def import_memeqa(path: str | Path, image_dir: str = "images") -> list[Item]:
    """A MemeQA split (:func:`read_memeqa`) as ``mcq`` Items."""
    path = Path(path)
    items = []
    for r in read_memeqa(path):
        if r["general_type"] == "single":
            answer = [int(r["answer_key"])]
        else:
            answer = [i for i, flag in enumerate(r["answer_key"]) if int(flag)]
        items.append(
            MultipleChoice.make_item(
                str(r["id"]),
                [f"{image_dir}/{r['img']}"],
                r["question"],
                answer,
                list(r["options"]),
                r["general_type"],
                r["specific_type"],
                {"source": path.name},
            )
        )
    return items


def export_memeqa(items: Iterable[Item], path: str | Path) -> int:
    """Write ``mcq`` Items as MemeQA JSON (multi-answer items as 0/1 lists); returns the count."""
    out = []
    for it in items:
        if it.options is None:
            raise ValueError(
                f"item {it.id!r} has no options; MemeQA JSON holds multiple-choice items only"
            )
        general = it.meta.get("general_type", "single" if len(it.answer) == 1 else "multi")
        if general == "single" and len(it.answer) != 1:
            raise ValueError(f"item {it.id!r} is single-answer but has answer {it.answer!r}")
        answer_key = (
            it.answer[0]
            if general == "single"
            else [int(i in it.answer) for i in range(len(it.options))]
        )
        out.append(
            {
                "id": it.id,
                "img": Path(it.images[0]).name if it.images else None,
                "question": it.question,
                "options": it.options,
                "general_type": general,
                "specific_type": it.meta.get("specific_type"),
                "answer_key": answer_key,
            }
        )
    write_json(path, out)
    return len(out)
