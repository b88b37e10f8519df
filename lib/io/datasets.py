"""Dataset folders: written, read whole, streamed, or read at offsets.

A *dataset folder* is ``items.jsonl`` (one :class:`lib.core.schema.Item` per line) + ``images/`` +
``dataset.json`` (name, version, created, provenance, license, and the manifest of
:mod:`lib.io.dataset_manifest`). It loads with HF ``datasets``::

    datasets.load_dataset("json", data_files=str(folder / "items.jsonl"), split="train")

Every reader here refuses a folder its manifest does not describe (:func:`lib.io.dataset_manifest.check_complete`).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from lib.core.schema import Item
from lib.io.dataset_manifest import _count_mismatch, _writer, check_complete, manifest_fields
from lib.io.jsonl import _malformed, write_json, write_jsonl_hashed
from lib.io.memory import CHUNK_LINES, _decode_chunk, paused_gc, share_strings


def dataset_info(
    name: str,
    version: str = "1",
    license: str = "unspecified",
    provenance: dict | None = None,
    **extra,
) -> dict:
    return {
        "name": name,
        "version": version,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "license": license,
        "provenance": provenance or {},
        **extra,
    }


def save_dataset(folder: str | Path, items: Iterable[Item], info: dict) -> int:
    """Write ``items.jsonl`` (atomically) and ``dataset.json``; images must already be under
    ``folder/images/`` (item image paths are relative to the folder). Returns the item count.

    ``dataset.json`` first marks the folder ``"complete": false`` and is written again last with
    the manifest (:func:`manifest_fields`): a write stopped in between leaves a folder readers
    refuse (:func:`check_complete`), not a new ``items.jsonl`` under the old description."""
    folder = Path(folder)
    seen: set[str] = set()
    images: set[str] = set()

    def rows():
        for item in items:
            if item.id in seen:
                raise ValueError(
                    f"duplicate item id {item.id!r} while writing {folder / 'items.jsonl'}"
                )
            seen.add(item.id)
            images.update(item.images)
            yield item.to_dict()

    write_json(folder / "dataset.json", {**info, "complete": False, "writer": _writer()})
    n, size, digest = write_jsonl_hashed(folder / "items.jsonl", rows())
    write_json(folder / "dataset.json", {**info, **manifest_fields(n, len(images), size, digest)})
    return n


def scan_items(folder: str | Path, share: bool = True) -> Iterator[tuple[int, Item]]:
    """``(byte offset, Item)`` of every record of a dataset's ``items.jsonl``, streamed (a chunk
    of lines in memory at a time, :func:`decode_lines`); a bad record raises naming the file and line.
    ``share=False`` for a pass that keeps no item (:func:`share_strings`). A folder its manifest
    does not describe is refused (:func:`check_complete` when opened; the record count at the end)."""
    path = Path(folder) / "items.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a dataset folder (no items.jsonl)")
    expected = check_complete(folder)

    def lines(f):
        offset = 0
        for line_no, line in enumerate(f, 1):
            start, offset = offset, offset + len(line)
            if line.strip():
                yield line_no, start, line

    with path.open("rb") as f:
        record = 0
        numbered = lines(f)
        while chunk := list(itertools.islice(numbered, CHUNK_LINES)):
            rows = _decode_chunk(
                [line for _, _, line in chunk], lambda k, e: _malformed(path, chunk[k][0], e)
            )
            for (_, start, _), row in zip(chunk, rows):
                record += 1
                try:
                    yield start, Item.from_dict(share_strings(row, Item.REPEATED) if share else row)
                except (TypeError, ValueError) as e:
                    raise ValueError(f"{path}: record {record} is not a valid Item ({e})") from None
    if expected is not None and record != expected:
        raise _count_mismatch(Path(folder), expected, record)


def load_items(folder: str | Path) -> list[Item]:
    """The items of a dataset folder; a bad record raises naming the file and line."""
    with paused_gc():
        return [it for _, it in scan_items(folder)]


def read_items_at(
    folder: str | Path, offsets: Iterable[int], share: bool = True, check: bool = True
) -> list[Item]:
    """The items whose lines start at ``offsets`` (from :func:`scan_items` or :func:`item_index`),
    read by seeking: a sample of a large dataset costs its own lines only (decoded in chunks,
    :func:`decode_lines`). ``share``: intern the repeated fields' short strings (:func:`share_strings`); ``check``: refuse a folder its
    manifest does not describe (:func:`check_complete`; :class:`ItemsAt` checks once)."""
    path = Path(folder) / "items.jsonl"
    if check:
        check_complete(folder)
    out = []

    def bad(off, e):
        return ItemsChanged(
            f"{path}: the record at byte {off} is not a valid Item ({e}); the file changed "
            f"since it was indexed?"
        )

    with path.open("rb") as f, paused_gc():
        offsets = iter(offsets)
        while chunk := list(itertools.islice(offsets, CHUNK_LINES)):
            lines = []
            for off in chunk:
                f.seek(off)
                lines.append(f.readline())
            for off, row in zip(chunk, _decode_chunk(lines, lambda k, e: bad(chunk[k], e))):
                try:
                    out.append(Item.from_dict(share_strings(row, Item.REPEATED) if share else row))
                except (TypeError, ValueError) as e:
                    raise bad(off, e) from None
    return out


class ItemsChanged(ValueError):
    """An item read at an indexed offset is not the item the index named: the file was rewritten."""


class ItemsAt(Sequence):
    """The items of a dataset folder whose lines start at ``offsets``, read when they are asked
    for (:func:`read_items_at`, a slice or a chunk at a time) instead of held: an evaluation keeps
    one offset (8 bytes) per question while it asks or rescores them, not every question as a
    Python object.
    With ``ids`` (from an id index), each item read must have its id, else :class:`ItemsChanged`;
    ``share=False`` for items let go once used (:func:`share_strings`). The folder is checked
    against its manifest when made (:func:`check_complete`), and a file replaced since then is
    refused on the next read (:class:`ItemsChanged`)."""

    def __init__(
        self, folder: str | Path, offsets, ids: Sequence[str] | None = None, share: bool = True
    ):
        self.folder = Path(folder)
        self.offsets = array("q", offsets)
        self.ids, self.share = ids, share
        if ids is not None and len(ids) != len(self.offsets):
            raise ValueError(f"ItemsAt: {len(ids)} ids for {len(self.offsets)} offsets")
        check_complete(self.folder)
        self._file = self._identity()

    def _identity(self) -> tuple | None:
        """The file as it is now (device, inode, size, modification time), None when absent."""
        try:
            st = (self.folder / "items.jsonl").stat()
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, k):
        if not isinstance(k, slice):
            k = range(len(self))[k]  # an IndexError past the end, negative indices counted back
            return self[k : k + 1][0]
        if (
            self._identity() != self._file
        ):  # swapped or rewritten: its offsets point into another file
            raise ItemsChanged(
                f"{self.folder / 'items.jsonl'} changed since its items were located (a rerun "
                f"rewrote the dataset meanwhile); start again"
            )
        got = read_items_at(self.folder, self.offsets[k], share=self.share, check=False)
        if self.ids is not None:
            expected = self.ids[k]
            for it, i, off in zip(got, expected, self.offsets[k]):
                if it.id != i:
                    raise ItemsChanged(
                        f"{self.folder / 'items.jsonl'}: the record at byte {off} is item {it.id!r}, "
                        f"not {i!r}: the file changed since it was indexed"
                    )
        return got

    def __iter__(self) -> Iterator[Item]:
        for start in range(0, len(self), CHUNK_LINES):
            yield from self[start : start + CHUNK_LINES]

    def __repr__(self) -> str:
        return f"ItemsAt({str(self.folder)!r}, {len(self)} items)"


def load_dataset_info(folder: str | Path) -> dict:
    """A folder's ``dataset.json``: its description and manifest (see the module docstring)."""
    return json.loads((Path(folder) / "dataset.json").read_text())


def held_images(items: Iterable[Item], folder: str | Path) -> list[Item]:
    """``items`` with the images their run made held by the dataset ``folder`` itself, as
    :func:`save_dataset` expects: an image inside ``folder`` named relative to it; one elsewhere in
    the run (``<run>/<stage>/datasets/<name>``: an earlier stage's or this stage's own files)
    linked - a hard link, else a copy - into ``folder/images/`` under its file name (``-2``,
    ``-3``... after the stem where two files share one) and named so. An image outside the run (a
    user's image folder, declared by :func:`images_roots`) keeps its path. The folder then reads
    the same wherever its run is moved, and its ``items.jsonl`` is the same bytes from run to run
    (absolute paths named the run's folder)."""
    # paths compared as written (made absolute, ``..`` folded), not through symbolic links
    folder, items = Path(os.path.abspath(folder)), list(items)
    run = folder.parents[2]
    where = lambda im: Path(os.path.normpath(folder / im))  # noqa: E731
    inside = lambda src: src.relative_to(folder).as_posix()  # noqa: E731
    # the folder's own files keep their names: a linked file never takes one
    names = {
        inside(src) for it in items for im in it.images if (src := where(im)).is_relative_to(folder)
    }
    held: dict[Path, str] = {}  # source file -> its name in the folder
    out = []
    for it in items:
        paths = []
        for im in it.images:
            src = where(im)
            if src.is_relative_to(folder):
                paths.append(inside(src))
            elif src.is_relative_to(run):
                if src not in held:
                    held[src] = _link_in(src, folder, names)
                paths.append(held[src])
            else:
                paths.append(im)
        out.append(replace(it, images=paths) if paths != list(it.images) else it)
    return out


def _link_in(src: Path, folder: Path, names: set[str]) -> str:
    """``src`` linked (else copied) into ``folder/images/`` under a name not yet in ``names``."""
    name, n = src.name, 1
    while f"images/{name}" in names:
        n += 1
        name = f"{src.stem}-{n}{src.suffix}"
    names.add(f"images/{name}")
    dst = folder / "images" / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)  # a file of an earlier build into this folder
    link_or_copy(src, dst)
    return f"images/{name}"


def link_or_copy(src: Path, dst: Path) -> None:
    """``dst`` as a hard link to ``src`` (no second copy of an image on the disk), else - another
    file system, or one without hard links - a copy keeping its times."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def images_roots(items: Iterable[Item], folder: str | Path) -> list[str]:
    """The folders outside ``folder`` that items' images live in (for ``dataset.json``'s
    ``images_roots``: a dataset declares where it reads images from)."""
    folder = Path(folder).resolve()
    roots = {
        str(Path(im).resolve().parent)
        for it in items
        for im in it.images
        if not (folder / im).resolve().is_relative_to(folder)
    }
    return sorted(roots)


def outside_images(folder: str | Path, uses: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Those of ``uses`` (item id, image path) whose path is absolute or escapes ``folder``
    (``..``) and is not under one of the ``images_roots`` the dataset declares: such paths are
    refused, since an image is read and, with an API backend, sent off the machine."""
    folder = Path(folder).resolve()
    info = folder / "dataset.json"
    roots = [
        Path(r).resolve()
        for r in (json.loads(info.read_text()).get("images_roots", []) if info.exists() else [])
    ]
    return [(item_id, im) for item_id, im in uses if _outside(folder, roots, im)]


def _outside(folder: Path, roots: list[Path], im: str) -> bool:
    """Does image path ``im`` leave the (resolved) dataset ``folder`` for a place no declared root holds?"""
    path = (folder / im).resolve()
    return not path.is_relative_to(folder) and not any(path.is_relative_to(r) for r in roots)


def to_hf_dataset(folder: str | Path):
    """The folder's items as a HF ``datasets.Dataset`` (the json loader; answers and meta are
    stored as JSON strings there because their shape varies between items)."""
    import datasets  # deferred: Hugging Face datasets is heavy and only this export needs it

    return datasets.load_dataset(
        "json", data_files=str(Path(folder) / "items.jsonl"), split="train"
    )
