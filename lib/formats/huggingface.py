"""A dataset folder made from a Hugging Face dataset (a ``save_to_disk`` folder or a parquet file):
its columns named, never guessed; every problem named by row and column before anything is written
(as :mod:`lib.formats.custom` does for a CSV); image cells written as their stored bytes."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

from PIL import Image
from tqdm.auto import tqdm

from lib.formats.custom import Columns, fresh_folder, row_item, staged_folder
from lib.formats.tsv import _UNSAFE
from lib.io import (
    DatasetCheck,
    DatasetError,
    ImageError,
    check_dataset,
    dataset_info,
    load_image,
    save_dataset,
)


def open_hf(path: str | Path, split: str | None = None, cache_dir: str | Path | None = None):
    """``(dataset, folder its relative image paths start from)`` for a Hugging Face ``datasets``
    folder written by ``save_to_disk`` (one split, or a DatasetDict with ``split``, needed when it
    holds several) or a parquet file."""
    import datasets  # deferred: Hugging Face datasets is heavy and only this import needs it

    path = Path(path)
    if path.is_file():
        if path.suffix != ".parquet":
            raise ValueError(f"{path}: neither a parquet file nor a folder written by save_to_disk")
        if split:
            raise ValueError(f"{path}: a parquet file is one split; drop --split")
        return datasets.Dataset.from_parquet(
            str(path), cache_dir=str(cache_dir) if cache_dir else None
        ), path.parent
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder")
    ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        if split is None and len(ds) != 1:
            raise ValueError(f"{path} holds the splits {list(ds)}; pass --split NAME")
        split = split or next(iter(ds))
        if split not in ds:
            raise ValueError(f"{path} has no split {split!r}; it has {list(ds)}")
        return ds[split], path / split
    if split:
        raise ValueError(f"{path} holds one split (no DatasetDict); drop --split")
    return ds, path


HF_BATCH = 256  # rows converted from Arrow at a time: a batch's images in memory, not the dataset's


def _hf_columns(
    have: list[str], columns: Columns, label: str, found: DatasetCheck
) -> tuple[Columns, dict]:
    """The columns an import reads (``options`` when the dataset has such a column and none is
    named) and role -> column; a named column the dataset lacks raises :class:`DatasetError`."""
    if columns.options is None:
        columns = Columns(
            columns.id,
            columns.image,
            columns.question,
            "options" if "options" in have else None,
            columns.answer,
        )
    wanted = {
        "id": columns.id,
        "image": columns.image,
        "question": columns.question,
        "options": columns.options,
        "answer": columns.answer,
    }
    for role, column in wanted.items():
        if column and column not in have:
            found.add(
                label,
                None,
                column,
                f"no such column; the dataset has {have}; pass --{role}-column NAME"
                + (" (or --id-column '' to number the rows)" if role == "id" else ""),
            )
    if not found.ok:
        raise DatasetError(found)
    return columns, wanted


def _hf_id(row: dict, n: int, columns: Columns, first: dict, add) -> str | None:
    """Row ``n``'s id (its number where no id column is named), recorded in ``first`` (id -> row);
    None, reported through ``add``, where it is no id or a duplicate."""
    rid = str(n) if not columns.id else row.get(columns.id)
    rid = str(rid) if isinstance(rid, int) and not isinstance(rid, bool) else rid
    if not isinstance(rid, str) or not rid:
        add(
            columns.id,
            f"{rid!r} is not an id; pass --id-column of a column of unique ids, or "
            f"--id-column '' to number the rows",
        )
        return None
    if rid in first:
        add(
            columns.id,
            f"duplicate id {rid!r} (first in row {first[rid]}); ids must be unique",
        )
        return None
    first[rid] = n
    return rid


def _hf_images(cell, rid: str, n: int, folders: tuple, names: set, column: str, add) -> list[str]:
    """An image cell's images written into the staged folder (``folders``: it and the folder
    relative paths start from), each under a safe name of the row's id not taken yet (``names``);
    a cell that holds no image is reported through ``add`` and left out."""
    tmp, source = folders
    images = []
    for k, value in enumerate(cell if isinstance(cell, list) else [cell]):
        stem = _UNSAFE.sub("_", rid) + (f"_{k}" if isinstance(cell, list) else "")
        stem = (
            stem if stem not in names else f"{stem}_row{n}"
        )  # ids 'a/b' and 'a_b' share a safe name
        names.add(stem)
        try:
            images.append(_write_hf_image(value, tmp, stem, source))
        except ValueError as e:
            add(column, str(e))
    return images


def import_hf(
    path: str | Path,
    out: str | Path,
    split: str | None = None,
    task: str | None = None,
    columns: Columns = Columns(),
    name: str | None = None,
    license: str = "unspecified",
    cache_dir: str | Path | None = None,
) -> DatasetCheck:
    """Make the dataset folder ``out`` from a Hugging Face dataset (:func:`open_hf`) and return its
    :func:`check_dataset`. Each column is named in ``columns`` (no guessing); an image cell is an
    ``Image`` feature's bytes (written as they are: no re-encoding), raw bytes, a PIL image or a
    path (relative to the dataset's folder), or a list of those. Options and answers are read as
    :func:`parse_options` and :func:`parse_answer` read them; the task is ``task``, else ``mcq``
    for rows with options and ``vqa.open`` without. ``cache_dir``: where ``datasets`` caches a
    parquet file's Arrow copy (its default cache when None)."""
    out = fresh_folder(out)
    ds, source = open_hf(path, split, cache_dir)
    label = Path(path).name
    found = DatasetCheck(Path(path))
    columns, wanted = _hf_columns(ds.column_names, columns, label, found)
    items, first, names = [], {}, set()
    with staged_folder(out) as tmp:
        table = ds.with_format(
            "arrow"
        )  # image cells stay their stored bytes: nothing decoded, nothing re-encoded
        for start in tqdm(
            range(0, len(ds), HF_BATCH), desc=f"importing {label}", unit=" batches", disable=None
        ):
            for n, row in enumerate(table[start : start + HF_BATCH].to_pylist(), start):

                def add(column, message, n=n):
                    found.add(label, n, column, message)

                rid = _hf_id(row, n, columns, first, add)
                if rid is None:
                    continue
                cell = row.get(columns.image)
                images = _hf_images(cell, rid, n, (tmp, source), names, columns.image, add)
                item = row_item(row, columns, rid, images, task, {}, add)
                if item is not None:
                    items.append(item)
        if not found.ok:
            raise DatasetError(found)  # the staged folder is removed: nothing written
        save_dataset(
            tmp,
            items,
            dataset_info(
                name or out.name,
                license=license,
                provenance={
                    "importer": "python -m lib.formats import-hf",
                    "source": str(Path(path).resolve()),
                    "split": split,
                    "columns": {k: v for k, v in wanted.items() if v is not None},
                },
            ),
        )
    return check_dataset(out)


def _write_hf_image(value, folder: Path, stem: str, source: Path) -> str:
    """Write one image cell under ``folder/images/`` as ``stem`` plus the suffix of its format,
    validated by :func:`load_image`; returns its path relative to ``folder``."""
    if isinstance(value, dict):  # an Image feature's stored form
        value = value.get("bytes") if value.get("bytes") is not None else value.get("path")
    if isinstance(value, Image.Image):
        buf = io.BytesIO()
        value.save(buf, format=value.format or "PNG")
        value = buf.getvalue()
    if isinstance(value, str):
        src = Path(value) if Path(value).is_absolute() else source / value
        if not src.is_file():
            raise ValueError(f"no such image file {src}; relative image paths start from {source}")
        value = src.read_bytes()
    if not isinstance(value, (bytes, bytearray)):
        raise ValueError(
            f"no image in this cell (got {type(value).__name__}); give image bytes, a PIL image or a path"
        )
    try:
        with warnings.catch_warnings():  # a bomb is refused by load_image below, not announced here
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(value)) as im:
                fmt = im.format
    except Exception:
        fmt = None
    suffix = {"JPEG": "jpg"}.get(fmt, (fmt or "bin").lower())
    dest = folder / "images" / f"{stem}.{suffix}"
    dest.write_bytes(value)
    try:
        load_image(dest, mode=None)
    except ImageError as e:
        dest.unlink()
        raise ValueError(f"{str(e).removeprefix(f'{dest}: ')}; replace the image") from None
    return dest.relative_to(folder).as_posix()
