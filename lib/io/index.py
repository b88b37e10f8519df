"""A dataset's id -> byte offset index, so items are read by seeking to their lines.

The index is kept under ``outputs/cache/index/``, keyed by ``items.jsonl``'s path, size and
modification time (an edited file is indexed again), as ``ids`` (newline-joined, UTF-8 bytes)
and ``offsets`` arrays in an ``.npz``.
"""

from __future__ import annotations

import os
import secrets
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
from numpy.lib import format as npy

from lib.io.datasets import scan_items
from lib.io.digests import _stat_key


def _index_path(folder: str | Path) -> Path:
    return _stat_key(Path(folder) / "items.jsonl", "index", ".npz")


def save_item_index(folder: str | Path, ids: list[str] | bytes, offsets) -> None:
    """Keep a dataset's id -> line offset index (``outputs/cache/index/``, keyed by the file's path,
    size and modification time, so an edited file is indexed again). ``ids``: a list, or the ids
    already joined by newlines (UTF-8), as a streaming pass collects them."""
    target = _index_path(folder)
    # One temporary name per writer: ranks of a torchrun job index the same file at once.
    tmp = target.with_suffix(f".{os.getpid()}-{secrets.token_hex(4)}.tmp.npz")
    blob = ids if isinstance(ids, (bytes, bytearray)) else "\n".join(ids).encode()
    np.savez(
        tmp, ids=np.frombuffer(blob, dtype=np.uint8), offsets=np.asarray(offsets, dtype=np.int64)
    )
    os.replace(tmp, target)


def item_index(
    folder: str | Path, rebuild: bool = False, wanted: set[str] | None = None
) -> dict[str, int]:
    """id -> byte offset of every item of a dataset, or only of the ``wanted`` ids it has (cached;
    built by one streaming pass when the cache has none for the file as it is now, or when
    ``rebuild``). With ``wanted``, rescoring a sample of a large set builds no dictionary of
    every id."""
    path = _index_path(folder)
    if path.exists() and not rebuild:
        if wanted is not None:
            with np.load(path) as z:
                offsets = z["offsets"]
            return _wanted_offsets(_index_id_chunks(path), offsets, {i.encode() for i in wanted})
        with np.load(path) as z:
            blob, offsets = z["ids"].tobytes(), z["offsets"]
        return dict(zip(blob.decode().split("\n") if blob else [], offsets.tolist()))
    ids, offsets = [], []
    for off, it in scan_items(folder, share=False):
        ids.append(it.id)
        offsets.append(off)
    save_item_index(folder, ids, offsets)
    return {i: off for i, off in zip(ids, offsets) if wanted is None or i in wanted}


def _index_id_chunks(path: Path, size: int = 2**20) -> Iterator[bytes]:
    """The newline-joined ids of a saved index, read a megabyte at a time from its ``ids`` member
    (an uncompressed .npy inside the .npz: its header is read with numpy's format functions)."""
    with zipfile.ZipFile(path) as zf, zf.open("ids.npy") as f:
        version = npy.read_magic(f)
        (npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0)(f)
        while chunk := f.read(size):
            yield chunk


def _id_batches(chunks: Iterable[bytes]) -> Iterator[list[bytes]]:
    """The ids of newline-joined ids read in ``chunks``, a list per chunk: a large index is never
    held whole, nor as one string per id."""
    rest = b""
    for chunk in chunks:
        data = rest + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        yield data[:cut].split(b"\n")
        rest = data[cut + 1 :]
    if rest:  # the last id (no newline follows it)
        yield [rest]


def _wanted_offsets(chunks: Iterable[bytes], offsets, wanted: set[bytes]) -> dict[str, int]:
    """The offsets of the ``wanted`` ids in newline-joined ids read in ``chunks``."""
    found, k = {}, 0
    for part in _id_batches(chunks):
        if not wanted.isdisjoint(part):
            found.update(
                (i.decode(), int(offsets[k + j])) for j, i in enumerate(part) if i in wanted
            )
        k += len(part)
    return found


class IdLookup:
    """A dataset's id -> byte offset lookup held as two sorted numpy arrays (each id's 64-bit hash
    and its offset), built from the saved index a megabyte at a time: rescoring every answer of
    a paper-sized Scrapbook set locates their questions chunk by chunk without a dictionary of
    every id (one Python object per id). Hand-written because the saved index is
    newline-joined bytes and no library maps it without one object per id. Two ids whose hashes
    collide (64-bit: vanishingly rare) find the same line; :class:`lib.io.ItemsAt` reads the id
    back, so a wrong line is refused (:class:`lib.io.ItemsChanged`), never graded."""

    def __init__(self, folder: str | Path, rebuild: bool = False):
        path = _index_path(folder)
        if rebuild or not path.exists():
            item_index(folder, rebuild=True, wanted=set())  # builds and saves it
        with np.load(path) as z:
            offsets = z["offsets"]
        hashes = [
            np.fromiter(map(hash, part), dtype=np.int64)
            for part in _id_batches(_index_id_chunks(path))
        ]
        if len(offsets) > sum(map(len, hashes)):  # the one id that is empty: no byte of it was read
            hashes.append(np.array([hash(b"")], dtype=np.int64))
        h = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.int64)
        order = np.argsort(h, kind="stable")
        self.hashes, self.offsets = h[order], np.asarray(offsets, dtype=np.int64)[order]

    def find(self, ids: list[str]) -> np.ndarray:
        """The offsets of ``ids`` in order, -1 for an id the dataset does not have."""
        h = np.fromiter((hash(i.encode()) for i in ids), dtype=np.int64, count=len(ids))
        pos = np.minimum(np.searchsorted(self.hashes, h), max(len(self.hashes) - 1, 0))
        found = (self.hashes[pos] == h) if len(self.hashes) else np.zeros(len(ids), dtype=bool)
        return np.where(found, self.offsets[pos] if len(self.hashes) else -1, -1)
