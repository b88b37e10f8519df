"""Your own dataset: a dataset folder made from a CSV or a Hugging Face dataset (the latter:
:mod:`lib.formats.huggingface`).

:func:`import_csv` and :func:`lib.formats.huggingface.import_hf` name the row and column of every problem of the source
(:class:`lib.io.DatasetError`) before anything is written, build the folder aside and put it in
place whole (:func:`staged_folder`), and return the new folder's :func:`lib.io.check_dataset`.
``examples/my_dataset`` is one to copy.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lib.core.schema import Item
from lib.families.memeqa.task import MultipleChoice
from lib.families.vqa.task import OpenVQA
from lib.formats.tsv import _LETTERS
from lib.io import (
    DatasetCheck,
    DatasetError,
    ImageError,
    aside_folder,
    check_dataset,
    dataset_info,
    load_image,
    save_dataset,
)


def default_task(has_options: bool) -> str:
    """The task of an imported row that names none: multiple choice with options, open VQA without."""
    return MultipleChoice.name if has_options else OpenVQA.name


@dataclass(frozen=True)
class Columns:
    """The source columns an importer reads each part of an item from. ``options`` None: the
    column ``options`` where the source has one, else every question is open. ``id`` "": items
    are numbered by row."""

    id: str = "id"
    image: str = "image"
    question: str = "question"
    options: str | None = None
    answer: str = "answer"


def parse_options(value) -> list[str] | None:
    """Options as a list of texts, from a list, a JSON list or ``|``-separated text; None (an open
    question) when empty: a list column holds ``[]`` where a row has no options."""
    if value is None or value == [] or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        if value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"{value[:80]!r} is not a JSON list ({e.msg}); write the options as a JSON list or "
                    f"separated by |"
                ) from None
            if value == []:
                return None
        else:
            value = [o.strip() for o in value.split("|")]
    if (
        not isinstance(value, list)
        or not all(isinstance(o, str) and o for o in value)
        or len(value) < 2
    ):
        raise ValueError(
            f"{value!r}: a multiple-choice item needs at least 2 non-empty option texts"
        )
    return value


def parse_answer(value, options: list[str] | None) -> list:
    """An Item's ``answer`` from a source value. With options: letters (A, B, ...), 0-based indices
    or option texts, several separated by ``|`` or as a list, giving sorted option indices; a
    token that names two different options (the text "2" as an index and as an option) is refused.
    Without options: reference texts, several separated by ``|`` or as a JSON list."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"{value[:80]!r} is not a JSON list ({e.msg})") from None
    if isinstance(value, str):
        tokens = [t.strip() for t in value.split("|")]
    else:
        tokens = value if isinstance(value, list) else [value]
    tokens = [t for t in tokens if t is not None and t != ""]
    if any(isinstance(t, bool) or not isinstance(t, (str, int, float)) for t in tokens):
        raise ValueError(f"{value!r}: an answer is text, an index or a list of those")
    if options is None:
        if not tokens:
            raise ValueError("no reference answer; give one or more, separated by |")
        return [t if isinstance(t, str) else format(t, "g") for t in tokens]
    if not tokens:
        raise ValueError(
            f"no answer; give the correct option as a letter A-{_LETTERS[len(options) - 1]}, a 0-based "
            f"index or its text"
        )
    return sorted({_option_index(t, options) for t in tokens})


def _option_index(token, options: list[str]) -> int:
    """The option a letter, a 0-based index or an option's text names (see :func:`parse_answer`)."""
    n = len(options)
    named = set()
    if isinstance(token, (int, float)):
        if token != int(token) or not 0 <= token < n:
            raise ValueError(f"{token!r} is not an index 0-{n - 1} of the {n} options")
        return int(token)
    if len(token) == 1 and token in _LETTERS[:n]:
        named.add(_LETTERS.index(token))
    if token.isdigit() and int(token) < n:
        named.add(int(token))
    if token in options:
        named.add(options.index(token))
    if len(named) > 1:
        raise ValueError(
            f"{token!r} names options {sorted(named)} (as a letter, an index or a text); write the letter"
        )
    if not named:
        raise ValueError(
            f"{token!r} is not a letter A-{_LETTERS[n - 1]}, an index 0-{n - 1} or one of the options "
            f"{options}"
        )
    return named.pop()


def row_item(
    row: dict, cols: Columns, rid: str, images: list[str], task: str | None, meta: dict, add
) -> Item | None:
    """The Item a source row makes, or None after ``add(column, message)`` for each problem."""
    bad = False

    def problem(column, message):
        nonlocal bad
        bad = True
        add(column, message)

    question = row.get(cols.question)
    if not isinstance(question, str) or not question.strip():
        problem(cols.question, f"no question text (got {question!r})")
    try:
        options = parse_options(row.get(cols.options)) if cols.options else None
    except ValueError as e:
        problem(cols.options, str(e))
        return None  # the answer is read against the options
    task = task or default_task(bool(options))
    try:
        answer = parse_answer(row.get(cols.answer), options)
    except ValueError as e:
        problem(cols.answer, str(e))
    if bad:
        return None
    if options is not None:
        meta = {"general_type": "single" if len(answer) == 1 else "multi", **meta}
    try:
        return Item(
            id=rid,
            task=task,
            question=question,
            images=images,
            options=options,
            answer=answer,
            meta=meta,
        )
    except (TypeError, ValueError) as e:
        problem(cols.answer, str(e))
        return None


def fresh_folder(out: str | Path) -> Path:
    """``out``, refused (before any work) when it exists and is not an empty folder."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: exists and is not empty; choose another --out or remove it")
    return out


@contextmanager
def staged_folder(out: str | Path):
    """A fresh folder beside ``out`` (:func:`aside_folder`), renamed to ``out`` when the block
    succeeds and removed when it fails: an import leaves a whole dataset folder or none. ``out``
    must be absent or empty (one made meanwhile by another run is not replaced: the rename fails)."""
    out = fresh_folder(out)
    tmp = aside_folder(out, "partial")
    try:
        (tmp / "images").mkdir()
        yield tmp
        if out.exists():
            out.rmdir()
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _csv_images(row: dict, root: Path, copies: dict, add) -> list[str]:
    """A CSV row's images as paths in the dataset folder (``|``-separated cells, relative to
    ``root``), each readable file recorded once in ``copies`` (path in the folder -> source file);
    a problem is reported through ``add`` and that image left out."""
    images = []
    for im in filter(None, (p.strip() for p in (row.get("image") or "").split("|"))):
        rel = Path(im)
        if rel.is_absolute() or ".." in rel.parts:
            add(
                "image",
                f"{im} is not a path inside {root}; give paths relative to the CSV's folder, or to "
                f"--images-root",
            )
            continue
        dest = rel.as_posix() if rel.parts[0] == "images" else f"images/{rel.as_posix()}"
        if dest not in copies:
            if not (root / rel).is_file():
                add(
                    "image",
                    f"no such image file {root / rel}; image paths are relative to the CSV's folder, "
                    f"or to --images-root",
                )
                continue
            try:
                load_image(root / rel, mode=None)
            except ImageError as e:
                add("image", f"{e}; replace it with a readable image")
                continue
            copies[dest] = root / rel
        images.append(dest)
    return images


def _csv_meta(row: dict, add) -> dict:
    """A CSV row's ``meta`` cell as a dict (empty when blank; a problem reported through ``add``)."""
    meta = {}
    if (row.get("meta") or "").strip():
        try:
            meta = json.loads(row["meta"])
        except json.JSONDecodeError as e:
            add(
                "meta",
                f"malformed JSON ({e.msg} at column {e.colno}); write a JSON object or leave it empty",
            )
        if not isinstance(meta, dict):
            add("meta", f"must be a JSON object, got {row['meta'][:80]!r}")
            meta = {}
    return meta


def _check_header(path: Path, header: list[str], found: DatasetCheck) -> None:
    """Refuse a CSV whose header lacks a column every row needs, naming each."""
    for column in ("id", "image", "question", "answer"):
        if column not in header:
            found.add(
                path.name,
                1,
                column,
                f"no such column; the header has {header}; name the columns id, image, "
                f"question, options, answer",
            )
    if not found.ok:
        raise DatasetError(found)


def _csv_id(row: dict, n: int, first: dict, add) -> str:
    """A CSV row's id (empty when it has none), recorded in ``first`` (id -> row) the first time;
    an empty or duplicate id is reported through ``add``."""
    rid = (row.get("id") or "").strip()
    if not rid:
        add("id", "empty; every row needs an id")
    elif rid in first:
        add("id", f"duplicate id {rid!r} (first on row {first[rid]}); ids must be unique")
    else:
        first[rid] = n
    return rid


def _csv_items(path: Path, root: Path, task: str | None, found: DatasetCheck, copies: dict) -> list:
    """The Items of a CSV's rows (every problem added to ``found``), their images recorded in
    ``copies`` (path in the dataset folder -> source file)."""
    items, first = [], {}  # first: id -> row
    with path.open(
        newline="", encoding="utf-8-sig"
    ) as f:  # -sig: a spreadsheet's byte-order mark is no header
        reader = csv.DictReader(f)
        _check_header(path, reader.fieldnames or [], found)
        for n, row in enumerate(reader, 2):  # row 1 is the header, as a spreadsheet numbers them

            def add(column, message, n=n):
                found.add(path.name, n, column, message)

            rid = _csv_id(row, n, first, add)
            images = _csv_images(row, root, copies, add)
            item = row_item(
                row,
                Columns(options="options"),
                rid or "?",
                images,
                (row.get("task") or "").strip() or task,
                _csv_meta(row, add),
                add,
            )
            if item is not None and rid:
                items.append(item)
    return items


def import_csv(
    path: str | Path,
    out: str | Path,
    task: str | None = None,
    images_root: str | Path | None = None,
    name: str | None = None,
    license: str = "unspecified",
) -> DatasetCheck:
    """Make the dataset folder ``out`` from a CSV and return its :func:`check_dataset`.

    Columns: ``id``, ``image`` (a path relative to ``images_root``, default the CSV's folder;
    several separated by ``|``; copied to ``out/images/`` under the same relative path, or to
    ``out/`` when it starts with ``images/``, as a CSV beside its dataset folder's images does),
    ``question``, ``options`` (optional; ``|``-separated or a JSON list) and ``answer``
    (:func:`parse_answer`); optional ``task`` (else ``task``, else ``mcq`` for rows with options,
    ``vqa.open`` without) and ``meta`` (a JSON object). Every problem of every row is reported,
    naming row and column (:class:`DatasetError`), before anything is written."""
    path, out = Path(path), fresh_folder(out)
    root = Path(images_root) if images_root is not None else path.parent
    found = DatasetCheck(path)
    copies: dict = {}  # path in out -> source file
    items = _csv_items(path, root, task, found, copies)
    if not found.ok:
        raise DatasetError(found)
    info = dataset_info(
        name or out.name,
        license=license,
        provenance={
            "importer": "python -m lib.formats import-csv",
            "source": str(path.resolve()),
            "images_root": str(root.resolve()),
        },
    )
    with staged_folder(out) as tmp:
        for dest, src in copies.items():
            (tmp / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, tmp / dest)
        save_dataset(tmp, items, info)
    return check_dataset(out)
