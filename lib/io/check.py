"""Checking a dataset folder: every problem, not only the first, each naming file, line and field.

Run as ``python -m lib.formats check DIR``. :class:`DatasetCheck` also collects what an import
finds wrong with its source (:mod:`lib.formats`), and :class:`DatasetError` stops an import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from tqdm.auto import tqdm

from lib.core.schema import Item
from lib.io.dataset_manifest import _rerun
from lib.io.datasets import _outside
from lib.io.digests import file_sha256
from lib.io.images import ImageError, load_image

MAX_PROBLEMS = (
    50  # problems a check lists; the rest are counted: the first ones are those fixed first
)


ITEM_FIELDS = tuple(f.name for f in fields(Item))


ITEM_REQUIRED = ("id", "task", "question")


@dataclass(frozen=True)
class DatasetProblem:
    """One thing wrong in a dataset folder or an import's source: the file, its line (a CSV's row,
    a Hugging Face dataset's row index; None for the whole file), the field or column at fault, and
    what is wrong with what to do about it."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}{'' if self.line is None else f':{self.line}'}: {self.field}: {self.message}"


@dataclass
class DatasetCheck:
    """What a check (or an import) found: the first ``limit`` problems, how many more, and how many
    items and distinct images it read."""

    folder: Path
    problems: list[DatasetProblem] = field(default_factory=list)
    more: int = 0  # problems past ``limit``: counted, not kept
    items: int = 0
    images: int = 0
    limit: int = MAX_PROBLEMS

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def count(self) -> int:
        return len(self.problems) + self.more

    def add(self, file: str, line: int | None, field_: str, message: str) -> None:
        if len(self.problems) < self.limit:
            self.problems.append(DatasetProblem(file, line, field_, message))
        else:
            self.more += 1

    def __str__(self) -> str:
        if self.ok:
            return f"{self.folder}: ok, {self.items} items, {self.images} images"
        more = [f"... and {self.more} more problem(s)"] if self.more else []
        return "\n".join(
            [str(p) for p in self.problems] + more + [f"{self.folder}: {self.count} problem(s)"]
        )


class DatasetError(ValueError):
    """Problems that stopped an import (each naming its file, row and column); nothing was written."""

    def __init__(self, found: DatasetCheck):
        self.found = found
        super().__init__(str(found))


def item_problems(row) -> list[tuple[str, str]]:
    """``(field, message)`` for each way a decoded JSONL record fails to be an :class:`Item`.

    :meth:`Item.from_dict` decides; when it refuses a record, each field is tried alone on a
    minimal item, so every field at fault is named, not only the first. Adds the checks Item leaves
    to its writers (a non-empty task and image paths; one index for a single-answer multiple-choice
    item) because later stages rely on them."""
    if not isinstance(row, dict):
        return [("record", f"a line holds one JSON object (an Item), got {type(row).__name__}")]
    try:
        Item.from_dict(dict(row))
        out = []
    except (TypeError, ValueError) as e:
        out = _blame(row, e)
    blamed = {f for f, _ in out}
    task, images, options, meta = (row.get(k) for k in ("task", "images", "options", "meta"))
    # what Item accepts but later stages cannot use: an empty task name or image path, options not a list
    extra = [
        ("task", "must be a non-empty string naming the task (one of lib.families.TASKS)")
        if task == ""
        else None,
        ("options", f"must be a list of option texts or null, got {options!r}")
        if options is not None and not isinstance(options, list)
        else None,
    ]
    if isinstance(images, list):
        extra += [
            (f"images[{k}]", "must be a non-empty path string, got ''")
            for k, im in enumerate(images)
            if im == ""
        ]
    answer = row.get("answer")
    if (
        isinstance(options, list)
        and isinstance(answer, list)
        and len(answer) != 1
        and "answer" not in blamed
        and not (isinstance(meta, dict) and meta.get("general_type") == "multi")
    ):
        extra.append(
            (
                "answer",
                f"a single-answer item holds exactly one option index, got {answer!r}; for several "
                f'(or none) set meta.general_type to "multi"',
            )
        )
    return out + [p for p in extra if p is not None and p[0] not in blamed]


def _blame(row: dict, error: Exception) -> list[tuple[str, str]]:
    """The fields of ``row`` that :class:`Item` refuses, each tried alone on a minimal item (the
    answer with the row's options); the whole ``error`` when no single field is at fault."""
    out = [
        (k, f"unknown field; an Item has {', '.join(ITEM_FIELDS)}")
        for k in row
        if k not in ITEM_FIELDS
    ]
    out += [
        (k, f"missing; every item has {', '.join(ITEM_REQUIRED)}")
        for k in ITEM_REQUIRED
        if k not in row
    ]
    rid = row.get("id")
    base = {"id": rid if isinstance(rid, str) and rid else "?", "task": "", "question": ""}

    def refused(**values) -> str | None:
        try:
            Item(**{**base, **values})
        except (TypeError, ValueError) as e:
            return str(e)
        return None

    for name in ("id", "task", "question", "images", "options", "meta"):
        if name in row and (why := refused(**{name: row[name]})):
            out.append((name, why))
    if (
        "answer" in row
        and "options" not in {f for f, _ in out}
        and (why := refused(options=row.get("options"), answer=row["answer"]))
    ):
        out.append(("answer", why))
    return out or [("record", str(error))]


def _parsed_line(raw: bytes, n: int, found: DatasetCheck) -> tuple[bool, object]:
    """``(True, value)`` of line ``n`` of ``items.jsonl``, or ``(False, None)`` after adding why it
    is not JSON (not UTF-8, malformed)."""
    try:
        return True, json.loads(raw)
    except UnicodeDecodeError as e:
        found.add(
            "items.jsonl",
            n,
            "json",
            f"not UTF-8 text ({e.reason} at byte {e.start}); save the file as UTF-8",
        )
    except json.JSONDecodeError as e:
        found.add(
            "items.jsonl",
            n,
            "json",
            f"malformed JSON ({e.msg} at column {e.colno}); fix or remove the line",
        )
    return False, None


def _check_row(row, n: int, found: DatasetCheck, first: dict, seen: set, image_problem) -> None:
    """The problems of line ``n``'s value: not a valid Item, an id seen before (``first``: id -> its
    first line), an image that ``image_problem`` finds wrong (each image checked once: ``seen``)."""
    for name, message in item_problems(row):
        found.add("items.jsonl", n, name, message)
    if not isinstance(row, dict):
        return
    rid = row.get("id")
    if isinstance(rid, str) and rid:
        if rid in first:
            found.add(
                "items.jsonl",
                n,
                "id",
                f"duplicate id {rid!r} (first on line {first[rid]}); ids must be unique",
            )
        else:
            first[rid] = n
    images = row.get("images")
    for k, im in enumerate(images if isinstance(images, list) else []):
        if isinstance(im, str) and im and im not in seen:  # each image checked (and reported) once
            seen.add(im)
            if why := image_problem(im):
                found.add("items.jsonl", n, f"images[{k}]", why)


def check_dataset(folder: str | Path, limit: int = MAX_PROBLEMS) -> DatasetCheck:
    """Every problem of a dataset folder, not only the first, each naming file, line and field:
    ``dataset.json`` present and valid, every ``items.jsonl`` line valid JSON and a valid Item
    (:func:`item_problems`), ids unique, every image path inside the folder (or a declared
    ``images_roots`` folder) and readable (:func:`load_image`, each distinct image once), and
    ``items.jsonl`` the file ``dataset.json``'s manifest describes (count, size, SHA-256). Streams
    the file, so a large dataset costs its ids and image paths in memory."""
    folder = Path(folder)
    found = DatasetCheck(folder, limit=limit)
    info = _check_info(folder, found)
    path = folder / "items.jsonl"
    if not path.is_file():
        found.add(
            "items.jsonl",
            None,
            "file",
            f"no such file in {folder}; write one Item (a JSON object) per line, "
            f"as examples/my_dataset/items.jsonl does",
        )
        return found
    roots = [Path(r).resolve() for r in (info or {}).get("images_roots", []) if isinstance(r, str)]
    here = folder.resolve()
    first: dict[str, int] = {}  # id -> the line it first appears on
    seen_images: set[str] = set()
    with path.open("rb") as f:
        for n, raw in enumerate(
            tqdm(f, desc=f"checking {path}", unit=" lines", disable=None, leave=False), 1
        ):
            if not raw.strip():
                continue
            found.items += 1
            parsed, row = _parsed_line(raw, n, found)
            if parsed:
                _check_row(
                    row,
                    n,
                    found,
                    first,
                    seen_images,
                    lambda im: _image_problem(folder, here, roots, im),
                )
    found.images = len(seen_images)
    if isinstance(info, dict) and "num_items" in info and info["num_items"] != found.items:
        found.add(
            "dataset.json",
            None,
            "num_items",
            f"says {info['num_items']!r} but items.jsonl holds {found.items} "
            f"items; set it to {found.items} (save_dataset writes it)",
        )
    elif isinstance(info, dict):
        _check_manifest(folder, info, found)
    return found


def _check_manifest(folder: Path, info: dict, found: DatasetCheck) -> None:
    """The problems of ``items.jsonl`` against what ``dataset.json`` records of it (beyond its
    count): a write that never finished, another size, another SHA-256."""
    if info.get("complete") is False:
        found.add(
            "dataset.json",
            None,
            "complete",
            f"marks the dataset as being written ({info.get('writer', '?')}) "
            f"and it was never finished; {_rerun(folder)}",
        )
    path = folder / "items.jsonl"
    size = info.get("items_bytes")
    if size is not None and size != path.stat().st_size:
        found.add(
            "dataset.json",
            None,
            "items_bytes",
            f"says {size!r} but items.jsonl holds {path.stat().st_size} bytes; {_rerun(folder)}",
        )
    elif isinstance(info.get("items_sha256"), str) and info["items_sha256"] != file_sha256(
        path, remember=False
    ):
        found.add(
            "dataset.json",
            None,
            "items_sha256",
            f"items.jsonl does not match this sha256 (it changed since the "
            f"dataset was written); {_rerun(folder)}",
        )


def _check_info(folder: Path, found: DatasetCheck) -> dict | None:
    """``dataset.json``'s content, its problems added to ``found``; None when it cannot be read."""
    path = folder / "dataset.json"
    fix = json.dumps(
        {"name": folder.name or "my_dataset", "version": "1", "license": "unspecified"}
    )
    if not path.is_file():
        found.add(
            "dataset.json",
            None,
            "file",
            f"no such file in {folder}; write {fix} there (the dataset's name, "
            f"version and license)",
        )
        return None
    try:
        info = json.loads(path.read_bytes())
    except UnicodeDecodeError as e:
        found.add(
            "dataset.json",
            None,
            "json",
            f"not UTF-8 text ({e.reason} at byte {e.start}); save the file as UTF-8",
        )
        return None
    except json.JSONDecodeError as e:
        found.add(
            "dataset.json",
            e.lineno,
            "json",
            f"malformed JSON ({e.msg} at column {e.colno}); fix it, or write {fix}",
        )
        return None
    if not isinstance(info, dict):
        found.add("dataset.json", None, "file", f"must be one JSON object, such as {fix}")
        return None
    if not (isinstance(info.get("name"), str) and info["name"]):
        found.add(
            "dataset.json",
            None,
            "name",
            f'missing; name the dataset: "name": {json.dumps(folder.name or "my_dataset")}',
        )
    roots = info.get("images_roots", [])
    if not (isinstance(roots, list) and all(isinstance(r, str) for r in roots)):
        found.add(
            "dataset.json", None, "images_roots", f"must be a list of folder paths, got {roots!r}"
        )
    return info


def _image_problem(folder: Path, here: Path, roots: list[Path], im: str) -> str | None:
    """What is wrong with image path ``im`` of the dataset ``folder`` (resolved: ``here``), or None."""
    if _outside(here, roots, im):
        return (
            f"{im} is absolute or leaves the dataset folder; copy the image under {folder / 'images'} and give "
            f"its path relative to {folder} (or declare its folder in dataset.json's images_roots)"
        )
    path = folder / im
    if not path.is_file():
        return f"{im}: no such image file under {folder}; put the image there or fix the path"
    try:
        load_image(path, mode=None)
    except ImageError as e:
        return f"{im}: {str(e).removeprefix(f'{path}: ')}; replace it with a readable image"
    return None
