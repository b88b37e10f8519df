"""Datasets on disk: JSONL, validated images, dataset folders, MemeQA JSON and base64 TSV.

A *dataset folder* is ``items.jsonl`` (one :class:`lib.schema.Item` per line) + ``images/`` +
``dataset.json`` (name, version, created, provenance, license). It loads with HF ``datasets``::

    datasets.load_dataset("json", data_files=str(folder / "items.jsonl"), split="train")

JSONL, JSON and CSV files are written atomically (a unique temporary file beside the target,
flushed and fsynced, then renamed over it: a kill or a full disk leaves the old file or the new one)
or appended line by line; a malformed line is reported with its file and line number.

Images are validated on load: an empty, truncated, corrupt, non-image or decompression-bomb file
raises :class:`ImageError` naming the file; collection-level loaders skip such files and report
them in a :class:`LoadReport`.

**A dataset folder is complete when its manifest says so.** ``dataset.json`` is written last and
records ``num_items``, ``num_images``, ``items_bytes`` and ``items_sha256`` (:func:`save_dataset`,
the importers, Scrapbook generation and merging all write them). The rule readers apply
(:func:`scan_items`, :func:`load_items`, :func:`read_items_at`, :class:`ItemsAt`,
:func:`item_index`; :func:`check_complete` is the check) is "what the manifest records must hold":

- ``"complete": false`` in ``dataset.json`` (a writer marks the folder so before it rewrites
  ``items.jsonl`` in place, and clears it by writing the manifest) -> refused: the write never finished;
- ``items_bytes`` recorded -> a shorter ``items.jsonl`` is refused (a stat, when a reader opens it);
  a longer one too, unless its first ``items_bytes`` bytes are the recorded file (their SHA-256,
  computed once and remembered): lines appended to a whole dataset are read as additions, and
  ``check`` lists the count they change;
- ``num_items`` recorded -> a reader that streams the whole file must count that many records;
- ``items_sha256`` is checked against the whole file by :func:`check_dataset` (``python -m lib.io
  check DIR``) and :func:`verify_dataset`; readers do not read the file twice, to stay fast;
- a folder without ``dataset.json``, or whose ``dataset.json`` records none of these (your own,
  made by hand), loads as before.

A refusal (:class:`IncompleteDataset`) names the folder and says to rerun the stage that wrote it.
Folders are built aside under names no other run uses (:func:`aside_folder`:
``.<name>.building-<host>-<pid>-<random>``) and swapped in whole (:func:`swap_in`): two runs
building one dataset never share a temporary folder, and a swap deletes only what it built and
the previous complete version it replaces.

Your own dataset (``examples/my_dataset`` is one to copy): :func:`check_dataset` lists every
problem of a folder, each naming file, line and field; :func:`import_csv` and :func:`import_hf`
make a folder from a CSV or a Hugging Face dataset (a ``save_to_disk`` folder or a parquet file),
naming the row and column of every problem before writing anything::

    python -m lib.io check examples/my_dataset             # also checks items.jsonl against its recorded sha256
    python -m lib.io import-csv examples/my_dataset/data.csv --out DIR [--task T] [--images-root PATH]
    python -m lib.io import-hf PATH --out DIR [--split S] [--task T] [--image-column image] [--question-column
        question] [--options-column options] [--answer-column answer] [--id-column id]
"""

from __future__ import annotations

import argparse
import base64
import csv
import errno
import functools
import gc
import hashlib
import io
import itertools
import json
import os
import re
import secrets
import shutil
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

import pandas as pd
from PIL import Image

from lib.schema import Item, check_annotation

MAX_IMAGE_PIXELS = 89_478_485  # Pillow's own bomb threshold (~0.25 GB of RGBA); raised as an error here


class ImageError(ValueError):
    """An image file that cannot be used; the message names the file and the reason."""


class JSONLError(ValueError):
    """A malformed JSONL line; the message names the file and line number."""


# --- JSONL ------------------------------------------------------------------------------------

CHUNK_LINES = 2048  # lines decoded by one json.loads (see decode_lines)


def release_memory() -> None:
    """Hand memory freed by a finished phase back to the system: the garbage collector's pass,
    then glibc's ``malloc_trim`` (no-op elsewhere). glibc keeps freed heap memory for reuse, and
    its dynamic mmap threshold moves large buffers (numpy arrays, tensors) into that heap, so a
    phase that freed what it made still counted in the next one's peak RSS: sampling 20,000 of
    827,004 Scrapbook questions left 43 MB resident, 12 MB once trimmed. Hand-written: the
    standard library has no binding for it."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim`` from the running process's own symbols, or None (another libc)."""
    import ctypes

    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # TypeError: Windows has no handle for the process itself
        return None


@contextmanager
def paused_gc():
    """The cyclic garbage collector paused while many records are built (and enabled again after,
    if it was): records hold no cycles, and the collector's passes over a growing list of them were
    most of the time of reading 50,000 items (2.4 s against 0.9 s)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def decode_lines(chunk: list[str | bytes]) -> list | None:
    """The JSON object on each line of ``chunk``, decoded by one ``json.loads`` over the lines,
    each wrapped in brackets (``[[line1],[line2],...]``); None when that reading is not certain,
    for the caller to decode line by line and name the bad line.

    One call rather than one per line because the decoder shares equal keys within a call: the
    records of a chunk share their keys' strings instead of each holding copies (a quarter of a
    large dataset's memory), and it is faster. The reading is kept only when it gives, per line,
    a one-element list holding an object: a line left open (``{"a": [1``) meets its closing
    bracket inside an object and fails, a line holding two objects gives a longer list, and each
    line keeps its newline, so no string runs across lines."""
    if not chunk:
        return []
    binary = isinstance(chunk[0], bytes)
    text = b"[[" + b"],[".join(chunk) + b"]]" if binary else "[[" + "],[".join(chunk) + "]]"
    try:
        rows = json.loads(text)
    except json.JSONDecodeError:
        return None
    if len(rows) != len(chunk) or not all(type(r) is list and len(r) == 1 and type(r[0]) is dict for r in rows):
        return None
    return [r[0] for r in rows]


def _decode_chunk(lines: list[str | bytes], error) -> list:
    """Each line's JSON value: the chunk at once (:func:`decode_lines`) or, where that reading is
    not certain, line by line, raising ``error(k, e)`` for the first line ``k`` that is no JSON."""
    rows = decode_lines(lines)
    if rows is not None:
        return rows
    out = []
    for k, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise error(k, e) from None
    return out


def _malformed(path: Path, line_no: int, e: json.JSONDecodeError) -> JSONLError:
    return JSONLError(f"{path}:{line_no}: malformed JSON line ({e.msg} at column {e.colno}); fix or remove that line")


def read_jsonl(path: str | Path) -> Iterator[dict]:
    """Yield one dict per non-empty line; a malformed line raises :class:`JSONLError`. Lines are
    read and decoded in chunks (:func:`decode_lines`)."""
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        numbered = ((n, line) for n, line in enumerate(f, 1) if line.strip())
        while chunk := list(itertools.islice(numbered, CHUNK_LINES)):
            yield from _decode_chunk([line for _, line in chunk], lambda k, e: _malformed(path, chunk[k][0], e))


class HashingWriter:
    """A binary file's ``write`` that also counts the bytes written and folds them into a SHA-256:
    a file's manifest (size, digest) made while it is written, not by reading it again."""

    def __init__(self, f):
        self.f, self.bytes, self._sha = f, 0, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.f.write(data)
        self._sha.update(data)
        self.bytes += len(data)
        return len(data)

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: some systems cannot open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_file(path: str | Path, mode: str = "wb", **kw):
    """A file object writing a unique temporary file beside ``path``; on a clean exit it is
    flushed, fsynced and renamed over ``path``, on any error (a full disk, a kill signal) removed:
    ``path`` holds its old content or the whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _write_lines(path: Path, rows: Iterable[dict]) -> tuple[int, HashingWriter]:
    n = 0
    with atomic_file(path) as f:
        out = HashingWriter(f)
        for row in rows:
            out.write((json.dumps(row, ensure_ascii=False, default=str) + "\n").encode())
            n += 1
    return n, out


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> int:
    """Write all rows atomically (:func:`atomic_file`: readers see the old file or the whole new
    one); returns the count."""
    return _write_lines(Path(path), rows)[0]


def write_jsonl_hashed(path: str | Path, rows: Iterable[dict]) -> tuple[int, int, str]:
    """:func:`write_jsonl`, returning ``(rows, bytes, sha256)`` of what it wrote; the digest is
    remembered as :func:`file_sha256` would (checking the file later costs a stat)."""
    path = Path(path)
    n, out = _write_lines(path, rows)
    digest = out.hexdigest()
    _remember_digest(path, digest)
    return n, out.bytes, digest


def write_csv(path: str | Path, df: pd.DataFrame) -> str:
    """Write a table as ``df.to_csv(path, index=False)`` does, atomically (:func:`atomic_file`);
    returns the file's SHA-256."""
    data = df.to_csv(index=False).encode("utf-8")
    with atomic_file(path) as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def append_jsonl(path: str | Path, rows: Iterable[dict]) -> int:
    """Append rows, each as one ``write`` of a whole line, flushed: a crash never splits a line
    that was reported written. Returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            f.flush()
            n += 1
    return n


def write_json(path: str | Path, obj) -> None:
    """Write one JSON document atomically (indented, for humans and diffs; :func:`atomic_file`)."""
    with atomic_file(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, default=str)
        f.write("\n")


# --- images -----------------------------------------------------------------------------------

# --- annotations ---------------------------------------------------------------------------------

class AnnotationStore:
    """Append-only annotations in a JSONL file (one row per item, annotator and field); :meth:`latest`
    resolves them. Saved values are checked against :data:`lib.schema.FIELDS`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def save(self, item: str, annotator: str, values: dict, source: str = "human") -> int:
        """Append one row per (non-empty) field, flushed before returning; returns the row count."""
        if not annotator or not str(annotator).strip():
            raise ValueError("an annotation needs an annotator name")
        now = time.time()
        rows = [{"item": item, "annotator": annotator, "field": k, "value": check_annotation(k, v), "source": source,
                 "time": now} for k, v in values.items() if v not in (None, "", [])]
        return append_jsonl(self.path, rows) if rows else 0

    def rows(self) -> pd.DataFrame:
        cols = ["item", "annotator", "field", "value", "source", "time"]
        if not self.path.exists():
            return pd.DataFrame(columns=cols)
        return pd.DataFrame(list(read_jsonl(self.path)), columns=cols)

    def latest(self, include_machine: bool = False) -> pd.DataFrame:
        """One row per (item, annotator, field): the most recent save (file order breaks time ties)."""
        df = self.rows()
        if not include_machine:
            df = df[df["source"] == "human"]
        return df.reset_index().sort_values(["time", "index"]).groupby(["item", "annotator", "field"], as_index=False).last() \
            .drop(columns="index")

    def table(self, annotator: str | None = None, include_machine: bool = False) -> pd.DataFrame:
        """Wide table: one row per (item, annotator), one column per field."""
        df = self.latest(include_machine)
        if annotator:
            df = df[df["annotator"] == annotator]
        if df.empty:
            return pd.DataFrame(columns=["item", "annotator"])
        return df.pivot(index=["item", "annotator"], columns="field", values="value").reset_index()


def load_image(path: str | Path, mode: str | None = "RGB") -> Image.Image:
    """Open and fully decode an image, raising :class:`ImageError` (naming the file) when it is
    missing, empty, not an image, truncated, corrupt or larger than ``MAX_IMAGE_PIXELS``."""
    path = Path(path)
    if not path.is_file():
        raise ImageError(f"{path}: no such image file")
    if path.stat().st_size == 0:
        raise ImageError(f"{path}: empty file (0 bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                w, h = im.size
                if w * h > MAX_IMAGE_PIXELS:
                    raise ImageError(f"{path}: {w}x{h} pixels exceeds the {MAX_IMAGE_PIXELS:,}-pixel limit "
                                     f"(possible decompression bomb)")
                im.load()  # decode now: truncation and corruption surface here, not later
                return im.convert(mode) if mode else im.copy()
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ImageError(f"{path}: decompression bomb refused ({e})") from None
    except Image.UnidentifiedImageError:
        raise ImageError(f"{path}: not an image file (Pillow cannot identify it)") from None
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageError(f"{path}: truncated or corrupt image ({e})") from None


class ByteLRU:
    """Values kept least recently used out past ``max_mb`` bytes (each value's size given by the
    caller), with hit and miss counts. Hand-written: functools.lru_cache bounds entries, not
    bytes, and images and their tensors differ in size."""

    def __init__(self, max_mb: float):
        from collections import OrderedDict

        self.max_bytes, self.bytes, self.hits, self.misses = int(max_mb * 2**20), 0, 0, 0
        self._values: OrderedDict = OrderedDict()

    def get(self, key):
        """The value kept under ``key`` (now the most recent), or None (counted as a miss)."""
        value = self._values.get(key)
        if value is None:
            self.misses += 1
            return None
        self._values.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key, value, size: int) -> None:
        """Keep ``value`` unless it alone exceeds the budget; older values go to make room."""
        if size > self.max_bytes:
            return
        self._values[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, old) = self._values.popitem(last=False)
            self.bytes -= old

    def stats(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "mb": round(self.bytes / 2**20, 1)}


class ImageCache(ByteLRU):
    """Decoded images within a byte budget (:class:`ByteLRU`), so a loop that meets an image many
    times decodes its file once: a training budget of steps draws each image many times, and an
    evaluation asks many questions about one image (Scrapbook) and every model and style the same
    images. Called like :func:`load_image` (a path, RGB); errors are :func:`load_image`'s."""

    def __call__(self, path: str | Path) -> Image.Image:
        found = self.get(str(path))
        if found is not None:
            return found[0]
        image = load_image(path)
        self.put(str(path), image, image.width * image.height * len(image.getbands()))
        return image


@dataclass
class LoadReport:
    """What a collection-level loader read and what it skipped (with the reason per file)."""

    loaded: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)  # kept, but worth a look (named, with why)

    def add_skip(self, path, error: Exception) -> None:
        self.skipped.append((str(path), str(error)))

    def __str__(self) -> str:
        lines = [f"loaded {self.loaded}, skipped {len(self.skipped)}"]
        lines += [f"  skipped {p}: {why}" for p, why in self.skipped]
        lines += [f"  note {p}: {why}" for p, why in self.notes]
        return "\n".join(lines)


IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff"}


def load_images(paths: Iterable[str | Path], mode: str | None = "RGB") -> tuple[dict[str, Image.Image], LoadReport]:
    """Load many images; bad files are skipped, counted and listed in the report, never fatal."""
    images, report = {}, LoadReport()
    for p in paths:
        try:
            images[str(p)] = load_image(p, mode)
            report.loaded += 1
        except ImageError as e:
            report.add_skip(p, e)
    return images, report


def scan_images(folder: str | Path) -> tuple[list[Path], LoadReport]:
    """The readable images under ``folder`` (recursively, sorted), validating each one; unreadable
    files and files without an image suffix are reported, not returned."""
    good, report = [], LoadReport()
    for p in sorted(Path(folder).rglob("*")):
        if not p.is_file() or p.name.startswith("."):
            continue
        if p.suffix.lower() not in IMAGE_SUFFIXES:
            report.add_skip(p, "no image file extension")
            continue
        try:
            load_image(p, mode=None)
            good.append(p)
            report.loaded += 1
        except ImageError as e:
            report.add_skip(p, e)
    return good, report


# --- dataset folders --------------------------------------------------------------------------

def dataset_info(name: str, version: str = "1", license: str = "unspecified", provenance: dict | None = None,
                 **extra) -> dict:
    return {"name": name, "version": version, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "license": license, "provenance": provenance or {}, **extra}


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
                raise ValueError(f"duplicate item id {item.id!r} while writing {folder / 'items.jsonl'}")
            seen.add(item.id)
            images.update(item.images)
            yield item.to_dict()

    write_json(folder / "dataset.json", {**info, "complete": False, "writer": _writer()})
    n, size, digest = write_jsonl_hashed(folder / "items.jsonl", rows())
    write_json(folder / "dataset.json", {**info, **manifest_fields(n, len(images), size, digest)})
    return n


def manifest_fields(num_items: int, num_images: int, items_bytes: int, items_sha256: str) -> dict:
    """What ``dataset.json`` records of a finished ``items.jsonl`` (see the module docstring)."""
    return {"num_items": num_items, "num_images": num_images, "items_bytes": items_bytes, "items_sha256": items_sha256}


MANIFEST_KEYS = ("num_items", "items_bytes", "items_sha256")


class IncompleteDataset(ValueError):
    """A dataset folder whose ``items.jsonl`` is not the one its manifest (``dataset.json``)
    describes: a write that never finished, or a file changed since. The message names the folder."""


def _writer() -> str:
    return f"process {os.getpid()} on {socket.gethostname()}"


def dataset_manifest(folder: str | Path) -> dict:
    """What ``dataset.json`` records of the folder's ``items.jsonl`` (:data:`MANIFEST_KEYS` and
    ``complete``); empty for a folder without one (your own dataset: nothing to check)."""
    path = Path(folder) / "dataset.json"
    try:
        info = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):  # unreadable or no JSON: a hand-made file; `python -m lib.io check` says so
        return {}
    if not isinstance(info, dict):
        return {}
    return {k: info[k] for k in (*MANIFEST_KEYS, "num_images", "complete", "writer") if k in info}


def _rerun(folder: Path) -> str:
    return (f"rerun the stage (or command) that writes {folder}; if you edited the folder by hand, run "
            f"`python -m lib.io check {folder}` and remove num_items, items_bytes and items_sha256 from its "
            f"dataset.json")


def check_complete(folder: str | Path) -> int | None:
    """Refuse (:class:`IncompleteDataset`) a folder its manifest says is unfinished, or whose
    ``items.jsonl`` is shorter than recorded or, when longer, does not begin with the recorded
    file (lines appended to a whole dataset are read as additions: a stat, and only then a hash
    of the recorded part, remembered). Returns the ``num_items`` a reader streaming the whole file
    must count (None when none is recorded, or lines were appended)."""
    folder = Path(folder)
    m = dataset_manifest(folder)
    if m.get("complete") is False:
        writer = m.get("writer", "by an earlier run")
        raise IncompleteDataset(f"{folder}: dataset.json marks this dataset as being written ({writer}) and it was "
                                f"never finished: its items.jsonl may be partial; {_rerun(folder)}")
    n = m.get("num_items")
    n = n if isinstance(n, int) and not isinstance(n, bool) else None
    size = m.get("items_bytes")
    if not isinstance(size, int) or isinstance(size, bool):
        return n
    path = folder / "items.jsonl"
    try:
        actual = path.stat().st_size
    except FileNotFoundError:
        return n  # the reader says there is no items.jsonl
    if actual < size:
        raise IncompleteDataset(f"{folder}: items.jsonl holds {actual:,} bytes but dataset.json records {size:,}: the "
                                f"file is partial (a killed or concurrent write, an interrupted copy); {_rerun(folder)}")
    if actual > size:
        if _prefix_sha256(path, size) != m.get("items_sha256"):
            raise IncompleteDataset(f"{folder}: items.jsonl holds {actual:,} bytes but dataset.json records {size:,}, "
                                    f"and its first {size:,} bytes are not the recorded file: it was rewritten or "
                                    f"mixed with another write since the dataset was written; {_rerun(folder)}")
        return None  # the recorded items, whole, and lines appended after them
    return n


def _prefix_sha256(path: Path, size: int) -> str:
    """The SHA-256 of a file's first ``size`` bytes, remembered like :func:`file_sha256`'s."""
    memo = _stat_key(path, "digests", f".{size}.prefix.sha256")
    if memo.exists():
        return memo.read_text().strip()
    h, left = hashlib.sha256(), size
    with path.open("rb") as f:
        while left and (chunk := f.read(min(left, 2**20))):
            h.update(chunk)
            left -= len(chunk)
    digest = h.hexdigest()
    _remember_digest(path, digest, memo)
    return digest


def _count_mismatch(folder: Path, expected: int, found: int) -> IncompleteDataset:
    return IncompleteDataset(f"{folder}: items.jsonl holds {found:,} items but dataset.json records {expected:,}: "
                             f"the file is partial (a killed or concurrent write) or changed since the dataset was "
                             f"written; {_rerun(folder)}")


def verify_dataset(folder: str | Path) -> None:
    """The full check of a folder against its manifest: :func:`check_complete`, then the
    record count and the SHA-256 of ``items.jsonl`` (reads the whole file)."""
    folder = Path(folder)
    expected = check_complete(folder)
    m = dataset_manifest(folder)
    path = folder / "items.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a dataset folder (no items.jsonl)")
    if expected is not None:
        with path.open("rb") as f:
            found = sum(1 for line in f if line.strip())
        if found != expected:
            raise _count_mismatch(folder, expected, found)
    if isinstance(m.get("items_sha256"), str) and file_sha256(path, remember=False) != m["items_sha256"]:
        raise IncompleteDataset(f"{folder}: items.jsonl does not match the sha256 dataset.json records: it changed "
                                f"since the dataset was written; {_rerun(folder)}")


def aside_folder(out: str | Path, kind: str = "building") -> Path:
    """A new, empty folder beside ``out`` that no other run uses: ``.<name>.<kind>-<host>-<pid>-<random>``
    (created here, so two runs started together never share one). Leftovers of this host's dead
    processes (a killed build) are removed first; nothing of a live process is touched."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _clear_dead_asides(out)
    host = _host_tag()
    while True:
        folder = out.parent / f".{out.name}.{kind}-{host}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue


def _host_tag() -> str:
    """This machine's name as it goes into a folder name."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40]


def _clear_dead_asides(out: Path) -> None:
    """Remove ``.<name>.<kind>-<this host>-<pid>-<random>`` folders whose process is gone."""
    host = _host_tag()
    pattern = re.compile(rf"\.{re.escape(out.name)}\.[a-z]+-{re.escape(host)}-(\d+)-[0-9a-f]+")
    try:
        siblings = list(out.parent.iterdir())
    except FileNotFoundError:
        return
    for p in siblings:
        m = pattern.fullmatch(p.name)
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(p, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # another user's process, or a system that cannot tell: keep its folder
    return True


@functools.cache
def _renameat2():
    """glibc's ``renameat2`` (Linux, glibc >= 2.28), or None."""
    import ctypes

    try:
        f = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    except (OSError, TypeError):
        return None
    if f is not None:
        f.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return f


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (``RENAME_EXCHANGE``); False where that is not
    available or ``b`` does not exist."""
    import ctypes

    f = _renameat2()
    if f is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if f(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOENT, errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap_in(new: str | Path, out: str | Path, tries: int = 20) -> None:
    """Put the finished folder ``new`` in ``out``'s place and delete the version it replaces -
    the only thing deleted that this call did not build. Where Linux allows it the two are
    exchanged in one step (no moment without ``out``); elsewhere ``out`` is moved aside first.
    A concurrent swap of the same ``out`` is retried: the last complete version wins."""
    new, out = Path(new), Path(out)
    for _ in range(tries):
        if _exchange(new, out):
            shutil.rmtree(new, ignore_errors=True)  # now the previous version
            _fsync_dir(out.parent)
            return
        old = None
        if out.exists():
            old = aside_folder(out, "old")
            old.rmdir()
            try:
                out.rename(old)
            except FileNotFoundError:  # another run moved it first
                old = None
        try:
            new.rename(out)
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            continue  # another run put its version there meanwhile: swap again
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        _fsync_dir(out.parent)
        return
    raise OSError(f"{out}: could not swap in {new} ({tries} concurrent swaps in a row); it is kept there")


def scan_items(folder: str | Path, share: bool = True) -> Iterator[tuple[int, Item]]:
    """``(byte offset, Item)`` of every record of a dataset's ``items.jsonl``, streamed (a chunk
    of lines in memory at a time, :func:`decode_lines`); a bad record raises naming the file and line.
    ``share=False`` for a pass that keeps no item (:meth:`Item.from_dict`). A folder its manifest
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
            rows = _decode_chunk([line for _, _, line in chunk], lambda k, e: _malformed(path, chunk[k][0], e))
            for (_, start, _), row in zip(chunk, rows):
                record += 1
                try:
                    yield start, Item.from_dict(row, share)
                except (TypeError, ValueError) as e:
                    raise ValueError(f"{path}: record {record} is not a valid Item ({e})") from None
    if expected is not None and record != expected:
        raise _count_mismatch(Path(folder), expected, record)


def load_items(folder: str | Path) -> list[Item]:
    """The items of a dataset folder; a bad record raises naming the file and line."""
    with paused_gc():
        return [it for _, it in scan_items(folder)]


def read_items_at(folder: str | Path, offsets: Iterable[int], share: bool = True, check: bool = True) -> list[Item]:
    """The items whose lines start at ``offsets`` (from :func:`scan_items` or :func:`item_index`),
    read by seeking: a sample of a large dataset costs its own lines only (decoded in chunks,
    :func:`decode_lines`). ``share``: as :meth:`Item.from_dict`; ``check``: refuse a folder its
    manifest does not describe (:func:`check_complete`; :class:`ItemsAt` checks once)."""
    path = Path(folder) / "items.jsonl"
    if check:
        check_complete(folder)
    out = []

    def bad(off, e):
        return ItemsChanged(f"{path}: the record at byte {off} is not a valid Item ({e}); the file changed "
                            f"since it was indexed?")

    with path.open("rb") as f, paused_gc():
        offsets = iter(offsets)
        while chunk := list(itertools.islice(offsets, CHUNK_LINES)):
            lines = []
            for off in chunk:
                f.seek(off)
                lines.append(f.readline())
            for off, row in zip(chunk, _decode_chunk(lines, lambda k, e: bad(chunk[k], e))):
                try:
                    out.append(Item.from_dict(row, share))
                except (TypeError, ValueError) as e:
                    raise bad(off, e) from None
    return out


class ItemsChanged(ValueError):
    """An item read at an indexed offset is not the item the index named: the file was rewritten."""


class ItemsAt(Sequence):
    """The items of a dataset folder whose lines start at ``offsets``, read when they are asked
    for (:func:`read_items_at`, a slice or a chunk at a time) instead of held: an evaluation of
    20,000 of a Scrapbook set's questions keeps 8 bytes per question while it asks or rescores
    them, and one of all 827,004 no longer holds every question as a Python object (gigabytes).
    With ``ids`` (from an id index), each item read must have its id, else :class:`ItemsChanged`;
    ``share=False`` for items let go once used (:meth:`Item.from_dict`). The folder is checked
    against its manifest when made (:func:`check_complete`), and a file replaced since then is
    refused on the next read (:class:`ItemsChanged`)."""

    def __init__(self, folder: str | Path, offsets, ids: Sequence[str] | None = None, share: bool = True):
        from array import array

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
            return self[k:k + 1][0]
        if self._identity() != self._file:  # swapped or rewritten: its offsets point into another file
            raise ItemsChanged(f"{self.folder / 'items.jsonl'} changed since its items were located (a rerun "
                               f"rewrote the dataset meanwhile); start again")
        got = read_items_at(self.folder, self.offsets[k], share=self.share, check=False)
        if self.ids is not None:
            expected = self.ids[k]
            for it, i, off in zip(got, expected, self.offsets[k]):
                if it.id != i:
                    raise ItemsChanged(f"{self.folder / 'items.jsonl'}: the record at byte {off} is item {it.id!r}, "
                                       f"not {i!r}: the file changed since it was indexed")
        return got

    def __iter__(self) -> Iterator[Item]:
        for start in range(0, len(self), CHUNK_LINES):
            yield from self[start:start + CHUNK_LINES]

    def __repr__(self) -> str:
        return f"ItemsAt({str(self.folder)!r}, {len(self)} items)"


def _stat_key(path: Path, kind: str, suffix: str) -> Path:
    """Where ``outputs/cache/<kind>/`` keeps what was derived from ``path`` as it is now: keyed by
    the resolved path, size and modification time (ns), so an edited file gets a new entry."""
    from hashlib import sha256

    from lib.paths import cache_dir

    path = path.resolve()
    st = path.stat()
    return cache_dir(kind) / f"{sha256(f'{path}|{st.st_size}|{st.st_mtime_ns}'.encode()).hexdigest()[:32]}{suffix}"


def _index_path(folder: str | Path) -> Path:
    return _stat_key(Path(folder) / "items.jsonl", "index", ".npz")


def file_sha256(path: str | Path, remember: bool = True) -> str | None:
    """A file's SHA-256 (None when it does not exist), read in chunks; with ``remember`` kept like
    the item index (path, size, modification time): checking a 500 MB Scrapbook items.jsonl
    again costs a stat, not a second of hashing."""
    path = Path(path)
    if not path.exists():
        return None
    memo = _stat_key(path, "digests", ".sha256") if remember else None
    if memo is not None and memo.exists():
        return memo.read_text().strip()
    with path.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    if memo is not None:
        _remember_digest(path, digest, memo)
    return digest


def _remember_digest(path: Path, digest: str, memo: Path | None = None) -> None:
    """Keep ``digest`` as :func:`file_sha256`'s for ``path`` as it is now (its stat key)."""
    memo = memo or _stat_key(path, "digests", ".sha256")
    tmp = memo.with_suffix(f".{os.getpid()}-{secrets.token_hex(4)}.tmp")
    tmp.write_text(digest)
    os.replace(tmp, memo)


def save_item_index(folder: str | Path, ids: list[str] | bytes, offsets) -> None:
    """Keep a dataset's id -> line offset index (``outputs/cache/index/``, keyed by the file's path,
    size and modification time, so an edited file is indexed again). ``ids``: a list, or the ids
    already joined by newlines (UTF-8), as a streaming pass collects them."""
    import numpy as np

    target = _index_path(folder)
    tmp = target.with_suffix(".tmp.npz")
    blob = ids if isinstance(ids, (bytes, bytearray)) else "\n".join(ids).encode()
    np.savez(tmp, ids=np.frombuffer(blob, dtype=np.uint8), offsets=np.asarray(offsets, dtype=np.int64))
    os.replace(tmp, target)


def item_index(folder: str | Path, rebuild: bool = False, wanted: set[str] | None = None) -> dict[str, int]:
    """id -> byte offset of every item of a dataset, or only of the ``wanted`` ids it has (cached;
    built by one streaming pass when the cache has none for the file as it is now, or when
    ``rebuild``). With ``wanted``, rescoring 20,000 answers of an 827,004-question set no longer
    builds a dictionary of every id (100 MB)."""
    import numpy as np

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
    import zipfile

    from numpy.lib import format as npy

    with zipfile.ZipFile(path) as zf, zf.open("ids.npy") as f:
        version = npy.read_magic(f)
        (npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0)(f)
        while chunk := f.read(size):
            yield chunk


def _wanted_offsets(chunks: Iterable[bytes], offsets, wanted: set[bytes]) -> dict[str, int]:
    """The offsets of the ``wanted`` ids in newline-joined ids read in ``chunks``: an 827,004-id
    index is never held whole, nor as 827,004 strings (+110 MB for a 20,000-answer rescore)."""
    found, k, rest = {}, 0, b""

    def look(part: list[bytes]) -> None:
        nonlocal k
        if not wanted.isdisjoint(part):
            found.update((i.decode(), int(offsets[k + j])) for j, i in enumerate(part) if i in wanted)
        k += len(part)

    for chunk in chunks:
        data = rest + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        look(data[:cut].split(b"\n"))
        rest = data[cut + 1:]
    if rest:  # the last id (no newline follows it)
        look([rest])
    return found


def load_dataset_info(folder: str | Path) -> dict:
    """A folder's ``dataset.json``: its description and manifest (see the module docstring)."""
    return json.loads((Path(folder) / "dataset.json").read_text())


def images_roots(items: Iterable[Item], folder: str | Path) -> list[str]:
    """The folders outside ``folder`` that items' images live in (for ``dataset.json``'s
    ``images_roots``: a dataset declares where it reads images from)."""
    folder = Path(folder).resolve()
    roots = {str(Path(im).resolve().parent) for it in items for im in it.images
             if not (folder / im).resolve().is_relative_to(folder)}
    return sorted(roots)


def outside_images(folder: str | Path, uses: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Those of ``uses`` (item id, image path) whose path is absolute or escapes ``folder``
    (``..``) and is not under one of the ``images_roots`` the dataset declares: such paths are
    refused, since an image is read and, with an API backend, sent off the machine."""
    folder = Path(folder).resolve()
    info = folder / "dataset.json"
    roots = [Path(r).resolve() for r in (json.loads(info.read_text()).get("images_roots", []) if info.exists() else [])]
    return [(item_id, im) for item_id, im in uses if _outside(folder, roots, im)]


def _outside(folder: Path, roots: list[Path], im: str) -> bool:
    """Does image path ``im`` leave the (resolved) dataset ``folder`` for a place no declared root holds?"""
    path = (folder / im).resolve()
    return not path.is_relative_to(folder) and not any(path.is_relative_to(r) for r in roots)


def to_hf_dataset(folder: str | Path):
    """The folder's items as a HF ``datasets.Dataset`` (the json loader; answers and meta are
    stored as JSON strings there because their shape varies between items)."""
    import datasets

    return datasets.load_dataset("json", data_files=str(Path(folder) / "items.jsonl"), split="train")


# --- checking a dataset folder ----------------------------------------------------------------

MAX_PROBLEMS = 50  # problems a check lists; the rest are counted: the first ones are those fixed first
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
        return "\n".join([str(p) for p in self.problems] + more + [f"{self.folder}: {self.count} problem(s)"])


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
        Item.from_dict(dict(row), share=False)
        out = []
    except (TypeError, ValueError) as e:
        out = _blame(row, e)
    blamed = {f for f, _ in out}
    task, images, options, meta = (row.get(k) for k in ("task", "images", "options", "meta"))
    # what Item accepts but later stages cannot use: an empty task name or image path, options not a list
    extra = [("task", "must be a non-empty string naming the task (such as 'mcq' or 'vqa.open')")
             if task == "" else None,
             ("options", f"must be a list of option texts or null, got {options!r}")
             if options is not None and not isinstance(options, list) else None]
    if isinstance(images, list):
        extra += [(f"images[{k}]", "must be a non-empty path string, got ''") for k, im in enumerate(images) if im == ""]
    answer = row.get("answer")
    if isinstance(options, list) and isinstance(answer, list) and len(answer) != 1 and "answer" not in blamed \
            and not (isinstance(meta, dict) and meta.get("general_type") == "multi"):
        extra.append(("answer", f"a single-answer item holds exactly one option index, got {answer!r}; for several "
                                f"(or none) set meta.general_type to \"multi\""))
    return out + [p for p in extra if p is not None and p[0] not in blamed]


def _blame(row: dict, error: Exception) -> list[tuple[str, str]]:
    """The fields of ``row`` that :class:`Item` refuses, each tried alone on a minimal item (the
    answer with the row's options); the whole ``error`` when no single field is at fault."""
    out = [(k, f"unknown field; an Item has {', '.join(ITEM_FIELDS)}") for k in row if k not in ITEM_FIELDS]
    out += [(k, f"missing; every item has {', '.join(ITEM_REQUIRED)}") for k in ITEM_REQUIRED if k not in row]
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
    if "answer" in row and "options" not in {f for f, _ in out} and (why := refused(options=row.get("options"),
                                                                                    answer=row["answer"])):
        out.append(("answer", why))
    return out or [("record", str(error))]


def check_dataset(folder: str | Path, limit: int = MAX_PROBLEMS) -> DatasetCheck:
    """Every problem of a dataset folder, not only the first, each naming file, line and field:
    ``dataset.json`` present and valid, every ``items.jsonl`` line valid JSON and a valid Item
    (:func:`item_problems`), ids unique, every image path inside the folder (or a declared
    ``images_roots`` folder) and readable (:func:`load_image`, each distinct image once), and
    ``items.jsonl`` the file ``dataset.json``'s manifest describes (count, size, SHA-256). Streams
    the file, so a large dataset costs its ids and image paths in memory."""
    from tqdm.auto import tqdm

    folder = Path(folder)
    found = DatasetCheck(folder, limit=limit)
    info = _check_info(folder, found)
    path = folder / "items.jsonl"
    if not path.is_file():
        found.add("items.jsonl", None, "file", f"no such file in {folder}; write one Item (a JSON object) per line, "
                                               f"as examples/my_dataset/items.jsonl does")
        return found
    roots = [Path(r).resolve() for r in (info or {}).get("images_roots", []) if isinstance(r, str)]
    here = folder.resolve()
    first: dict[str, int] = {}  # id -> the line it first appears on
    seen_images: set[str] = set()
    with path.open("rb") as f:
        for n, raw in enumerate(tqdm(f, desc=f"checking {path}", unit=" lines", disable=None, leave=False), 1):
            if not raw.strip():
                continue
            found.items += 1
            try:
                row = json.loads(raw)
            except UnicodeDecodeError as e:
                found.add("items.jsonl", n, "json", f"not UTF-8 text ({e.reason} at byte {e.start}); save the file as UTF-8")
                continue
            except json.JSONDecodeError as e:
                found.add("items.jsonl", n, "json", f"malformed JSON ({e.msg} at column {e.colno}); fix or remove the line")
                continue
            for name, message in item_problems(row):
                found.add("items.jsonl", n, name, message)
            if not isinstance(row, dict):
                continue
            rid = row.get("id")
            if isinstance(rid, str) and rid:
                if rid in first:
                    found.add("items.jsonl", n, "id", f"duplicate id {rid!r} (first on line {first[rid]}); ids must be unique")
                else:
                    first[rid] = n
            images = row.get("images")
            for k, im in enumerate(images if isinstance(images, list) else []):
                if isinstance(im, str) and im and im not in seen_images:  # each image checked (and reported) once
                    seen_images.add(im)
                    if why := _image_problem(folder, here, roots, im):
                        found.add("items.jsonl", n, f"images[{k}]", why)
    found.images = len(seen_images)
    if isinstance(info, dict) and "num_items" in info and info["num_items"] != found.items:
        found.add("dataset.json", None, "num_items", f"says {info['num_items']!r} but items.jsonl holds {found.items} "
                                                     f"items; set it to {found.items} (save_dataset writes it)")
    elif isinstance(info, dict):
        _check_manifest(folder, info, found)
    return found


def _check_manifest(folder: Path, info: dict, found: DatasetCheck) -> None:
    """The problems of ``items.jsonl`` against what ``dataset.json`` records of it (beyond its
    count): a write that never finished, another size, another SHA-256."""
    if info.get("complete") is False:
        found.add("dataset.json", None, "complete", f"marks the dataset as being written ({info.get('writer', '?')}) "
                                                    f"and it was never finished; {_rerun(folder)}")
    path = folder / "items.jsonl"
    size = info.get("items_bytes")
    if size is not None and size != path.stat().st_size:
        found.add("dataset.json", None, "items_bytes", f"says {size!r} but items.jsonl holds {path.stat().st_size} "
                                                       f"bytes; {_rerun(folder)}")
    elif isinstance(info.get("items_sha256"), str) and info["items_sha256"] != file_sha256(path, remember=False):
        found.add("dataset.json", None, "items_sha256", f"items.jsonl does not match this sha256 (it changed since the "
                                                        f"dataset was written); {_rerun(folder)}")


def _check_info(folder: Path, found: DatasetCheck) -> dict | None:
    """``dataset.json``'s content, its problems added to ``found``; None when it cannot be read."""
    path = folder / "dataset.json"
    fix = json.dumps({"name": folder.name or "my_dataset", "version": "1", "license": "unspecified"})
    if not path.is_file():
        found.add("dataset.json", None, "file", f"no such file in {folder}; write {fix} there (the dataset's name, "
                                                f"version and license)")
        return None
    try:
        info = json.loads(path.read_bytes())
    except UnicodeDecodeError as e:
        found.add("dataset.json", None, "json", f"not UTF-8 text ({e.reason} at byte {e.start}); save the file as UTF-8")
        return None
    except json.JSONDecodeError as e:
        found.add("dataset.json", e.lineno, "json", f"malformed JSON ({e.msg} at column {e.colno}); fix it, or write {fix}")
        return None
    if not isinstance(info, dict):
        found.add("dataset.json", None, "file", f"must be one JSON object, such as {fix}")
        return None
    if not (isinstance(info.get("name"), str) and info["name"]):
        found.add("dataset.json", None, "name", f"missing; name the dataset: \"name\": {json.dumps(folder.name or 'my_dataset')}")
    roots = info.get("images_roots", [])
    if not (isinstance(roots, list) and all(isinstance(r, str) for r in roots)):
        found.add("dataset.json", None, "images_roots", f"must be a list of folder paths, got {roots!r}")
    return info


def _image_problem(folder: Path, here: Path, roots: list[Path], im: str) -> str | None:
    """What is wrong with image path ``im`` of the dataset ``folder`` (resolved: ``here``), or None."""
    if _outside(here, roots, im):
        return (f"{im} is absolute or leaves the dataset folder; copy the image under {folder / 'images'} and give "
                f"its path relative to {folder} (or declare its folder in dataset.json's images_roots)")
    path = folder / im
    if not path.is_file():
        return f"{im}: no such image file under {folder}; put the image there or fix the path"
    try:
        load_image(path, mode=None)
    except ImageError as e:
        return f"{im}: {str(e).removeprefix(f'{path}: ')}; replace it with a readable image"
    return None


# --- MemeQA JSON ------------------------------------------------------------------------------

MEMEQA_KEYS = ("id", "img", "question", "options", "general_type", "specific_type", "answer_key")


def read_yesbut_annotations(csv_path: str | Path) -> dict[str, dict]:
    """YesBut_Stage2_Annotation.csv rows by file name, with typed fields."""
    out = {}
    with open(csv_path, newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f), start=2):
            if not row.get("filename"):
                raise ValueError(f"{csv_path}: line {n} has no filename")
            out[row["filename"]] = {
                "left_description": row["left_image"], "right_description": row["right_image"],
                "overall_description": row["overall_description"],
                "text_in_left": row["is_text_in_left_image"].strip().upper() == "TRUE",
                "text_in_right": row["is_text_in_right_image"].strip().upper() == "TRUE",
                "connected": row["are_images_connected"].strip().upper() == "TRUE",
                "difficulty": row["difficulty_in_understanding"].strip().upper() or None}
    return out


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
        raise ValueError(f"{path}: a MemeQA split is a JSON list of records, got {type(records).__name__}")
    for n, r in enumerate(records):
        where = f"{path}: record {n} (id={r.get('id') if isinstance(r, dict) else None!r})"
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
        img = PurePosixPath(r["img"].replace("\\", "/"))
        if not r["img"] or img.is_absolute() or ".." in img.parts or re.match(r"^[A-Za-z]:", r["img"]):
            # readers join img to the split's images folder: it must stay inside that folder
            raise ValueError(f"{where}: img must be a file name inside the images folder, got {r['img'][:200]!r}")
        opts = r["options"]
        if not isinstance(opts, list) or len(opts) < 2 or not all(isinstance(o, str) for o in opts):
            raise ValueError(f"{where}: options must be a list of at least 2 strings, got {opts!r}")
        if r["general_type"] == "single":
            ok = isinstance(r["answer_key"], int) and not isinstance(r["answer_key"], bool) and 0 <= r["answer_key"] < len(opts)
        elif r["general_type"] == "multi":
            ok = isinstance(r["answer_key"], list) and len(r["answer_key"]) == len(opts) and \
                all(f in (0, 1, True, False) for f in r["answer_key"])
        else:
            raise ValueError(f"{where}: general_type must be 'single' or 'multi', got {r['general_type']!r}")
        if not ok:
            raise ValueError(f"{where}: answer_key {r['answer_key']!r} does not fit {len(opts)} options "
                             f"({'an index' if r['general_type'] == 'single' else 'one 0/1 flag per option'})")
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
        items.append(Item(
            id=str(r["id"]), task="mcq", images=[f"{image_dir}/{r['img']}"], question=r["question"],
            options=list(r["options"]), answer=answer,
            meta={"general_type": r["general_type"], "specific_type": r["specific_type"], "source": path.name},
        ))
    return items


def export_memeqa(items: Iterable[Item], path: str | Path) -> int:
    """Write ``mcq`` Items as MemeQA JSON (multi-answer items as 0/1 lists); returns the count."""
    out = []
    for it in items:
        if it.options is None:
            raise ValueError(f"item {it.id!r} has no options; MemeQA JSON holds multiple-choice items only")
        general = it.meta.get("general_type", "single" if len(it.answer) == 1 else "multi")
        if general == "single" and len(it.answer) != 1:
            raise ValueError(f"item {it.id!r} is single-answer but has answer {it.answer!r}")
        answer_key = it.answer[0] if general == "single" else [int(i in it.answer) for i in range(len(it.options))]
        out.append({
            "id": it.id, "img": Path(it.images[0]).name if it.images else None, "question": it.question,
            "options": it.options, "general_type": general,
            "specific_type": it.meta.get("specific_type"), "answer_key": answer_key,
        })
    write_json(path, out)
    return len(out)


# --- TSV with base64 images (VLMEvalKit / lmms-eval style) ------------------------------------

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_UNSAFE = re.compile(r"[^\w.-]")


def export_tsv(folder: str | Path, items: Iterable[Item], path: str | Path) -> int:
    """Write items as a VLMEvalKit-style TSV: index, image (base64 of the file bytes), question,
    A.., answer (letter(s) or text), category, id. Images are read (and validated) from ``folder``."""
    folder, path = Path(folder), Path(path)
    items = list(items)
    width = max((len(it.options or []) for it in items), default=0)
    fields = ["index", "id", "image", "question", *_LETTERS[:width], "answer", "category"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, delimiter="\t")
        w.writeheader()
        for n, it in enumerate(items):
            img = folder / it.images[0] if it.images else None
            if img is not None:
                load_image(img, mode=None)  # fail on a bad image here, naming it, not in a reader later
            row = {"index": n, "id": it.id, "question": it.question, "category": it.meta.get("specific_type", it.task),
                   "image": base64.b64encode(img.read_bytes()).decode() if img else ""}
            for i, opt in enumerate(it.options or []):
                row[_LETTERS[i]] = opt
            if it.options is not None:
                row["answer"] = "".join(_LETTERS[i] for i in it.answer)
            else:  # one reference as itself, several as a JSON list
                row["answer"] = it.answer[0] if len(it.answer) == 1 else json.dumps(it.answer)
            w.writerow(row)
    return len(items)


def import_tsv(path: str | Path, folder: str | Path, task: str = "mcq") -> tuple[list[Item], LoadReport]:
    """Read a base64-image TSV into Items, writing images to ``folder/images/``. Rows whose image
    does not decode are skipped and reported (naming the row), not fatal."""
    path, folder = Path(path), Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    csv.field_size_limit(1 << 31)
    items, report = [], LoadReport()
    with path.open(newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f, delimiter="\t"), 2):
            rid = row.get("id") or row.get("index") or str(n)
            where = f"{path}:{n} (id={rid})"
            options = [row[c] for c in _LETTERS if row.get(c)]
            answer = row.get("answer", "")
            if options:
                if not answer or any(c not in _LETTERS[:len(options)] for c in answer):
                    report.add_skip(where, f"answer {answer!r} is not option letters A-{_LETTERS[len(options) - 1]}")
                    continue
                ans = [_LETTERS.index(c) for c in answer]
            else:
                try:
                    ans = json.loads(answer) if answer.startswith("[") else [answer]
                except json.JSONDecodeError as e:
                    report.add_skip(where, f"answer {answer[:80]!r} is not valid JSON ({e})")
                    continue
                if not isinstance(ans, list) or not all(isinstance(a, str) for a in ans):
                    report.add_skip(where, f"answer {answer[:80]!r} is not a list of reference texts")
                    continue
            images = []
            if row.get("image"):
                try:
                    data = base64.b64decode(row["image"], validate=True)
                    with warnings.catch_warnings():  # a decompression bomb is refused, not loaded with a warning
                        warnings.simplefilter("error", Image.DecompressionBombWarning)
                        with Image.open(io.BytesIO(data)) as im:
                            im.load()
                            ext = (im.format or "png").lower().replace("jpeg", "jpg")
                except Exception as e:
                    report.add_skip(where, f"image does not decode: {type(e).__name__}: {e}")
                    continue
                rel = f"images/{_UNSAFE.sub('_', rid)}.{ext}"  # ids may hold '/' (MemeQA's do)
                (folder / rel).write_bytes(data)
                images.append(rel)
            items.append(Item(id=str(rid), task=task, images=images, question=row.get("question", ""),
                              options=options or None, answer=ans,
                              meta={"category": row.get("category"), "source": path.name}))
            report.loaded += 1
    return items, report


# --- your own dataset: CSV and Hugging Face imports -------------------------------------------

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
                raise ValueError(f"{value[:80]!r} is not a JSON list ({e.msg}); write the options as a JSON list or "
                                 f"separated by |") from None
            if value == []:
                return None
        else:
            value = [o.strip() for o in value.split("|")]
    if not isinstance(value, list) or not all(isinstance(o, str) and o for o in value) or len(value) < 2:
        raise ValueError(f"{value!r}: a multiple-choice item needs at least 2 non-empty option texts")
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
        raise ValueError(f"no answer; give the correct option as a letter A-{_LETTERS[len(options) - 1]}, a 0-based "
                         f"index or its text")
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
        raise ValueError(f"{token!r} names options {sorted(named)} (as a letter, an index or a text); write the letter")
    if not named:
        raise ValueError(f"{token!r} is not a letter A-{_LETTERS[n - 1]}, an index 0-{n - 1} or one of the options "
                         f"{options}")
    return named.pop()


def _row_item(row: dict, cols: Columns, rid: str, images: list[str], task: str | None, meta: dict,
              add) -> Item | None:
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
    task = task or ("mcq" if options else "vqa.open")  # the default: rows with options are multiple choice
    try:
        answer = parse_answer(row.get(cols.answer), options)
    except ValueError as e:
        problem(cols.answer, str(e))
    if bad:
        return None
    if options is not None:
        meta = {"general_type": "single" if len(answer) == 1 else "multi", **meta}
    try:
        return Item(id=rid, task=task, question=question, images=images, options=options, answer=answer, meta=meta)
    except (TypeError, ValueError) as e:
        problem(cols.answer, str(e))
        return None


def _fresh(out: str | Path) -> Path:
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
    out = _fresh(out)
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


def import_csv(path: str | Path, out: str | Path, task: str | None = None, images_root: str | Path | None = None,
               name: str | None = None, license: str = "unspecified") -> DatasetCheck:
    """Make the dataset folder ``out`` from a CSV and return its :func:`check_dataset`.

    Columns: ``id``, ``image`` (a path relative to ``images_root``, default the CSV's folder;
    several separated by ``|``; copied to ``out/images/`` under the same relative path, or to
    ``out/`` when it starts with ``images/``, as a CSV beside its dataset folder's images does),
    ``question``, ``options`` (optional; ``|``-separated or a JSON list) and ``answer``
    (:func:`parse_answer`); optional ``task`` (else ``task``, else ``mcq`` for rows with options,
    ``vqa.open`` without) and ``meta`` (a JSON object). Every problem of every row is reported,
    naming row and column (:class:`DatasetError`), before anything is written."""
    path, out = Path(path), _fresh(out)
    root = Path(images_root) if images_root is not None else path.parent
    found = DatasetCheck(path)
    items, copies, first = [], {}, {}  # copies: path in out -> source file; first: id -> row
    with path.open(newline="", encoding="utf-8-sig") as f:  # -sig: a spreadsheet's byte-order mark is no header
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        for column in ("id", "image", "question", "answer"):
            if column not in header:
                found.add(path.name, 1, column, f"no such column; the header has {header}; name the columns id, image, "
                                                f"question, options, answer")
        if not found.ok:
            raise DatasetError(found)
        for n, row in enumerate(reader, 2):  # row 1 is the header, as a spreadsheet numbers them
            def add(column, message, n=n):
                found.add(path.name, n, column, message)

            rid = (row.get("id") or "").strip()
            if not rid:
                add("id", "empty; every row needs an id")
            elif rid in first:
                add("id", f"duplicate id {rid!r} (first on row {first[rid]}); ids must be unique")
            else:
                first[rid] = n
            images = []
            for im in filter(None, (p.strip() for p in (row.get("image") or "").split("|"))):
                rel = Path(im)
                if rel.is_absolute() or ".." in rel.parts:
                    add("image", f"{im} is not a path inside {root}; give paths relative to the CSV's folder, or to "
                                 f"--images-root")
                    continue
                dest = rel.as_posix() if rel.parts[0] == "images" else f"images/{rel.as_posix()}"
                if dest not in copies:
                    if not (root / rel).is_file():
                        add("image", f"no such image file {root / rel}; image paths are relative to the CSV's folder, "
                                     f"or to --images-root")
                        continue
                    try:
                        load_image(root / rel, mode=None)
                    except ImageError as e:
                        add("image", f"{e}; replace it with a readable image")
                        continue
                    copies[dest] = root / rel
                images.append(dest)
            meta = {}
            if (row.get("meta") or "").strip():
                try:
                    meta = json.loads(row["meta"])
                except json.JSONDecodeError as e:
                    add("meta", f"malformed JSON ({e.msg} at column {e.colno}); write a JSON object or leave it empty")
                if not isinstance(meta, dict):
                    add("meta", f"must be a JSON object, got {row['meta'][:80]!r}")
                    meta = {}
            item = _row_item(row, Columns(options="options"), rid or "?", images, (row.get("task") or "").strip() or task,
                             meta, add)
            if item is not None and rid:
                items.append(item)
    if not found.ok:
        raise DatasetError(found)
    info = dataset_info(name or out.name, license=license, provenance={
        "importer": "python -m lib.io import-csv", "source": str(path.resolve()), "images_root": str(root.resolve())})
    with staged_folder(out) as tmp:
        for dest, src in copies.items():
            (tmp / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, tmp / dest)
        save_dataset(tmp, items, info)
    return check_dataset(out)


def open_hf(path: str | Path, split: str | None = None, cache_dir: str | Path | None = None):
    """``(dataset, folder its relative image paths start from)`` for a Hugging Face ``datasets``
    folder written by ``save_to_disk`` (one split, or a DatasetDict with ``split``, needed when it
    holds several) or a parquet file."""
    import datasets

    path = Path(path)
    if path.is_file():
        if path.suffix != ".parquet":
            raise ValueError(f"{path}: neither a parquet file nor a folder written by save_to_disk")
        if split:
            raise ValueError(f"{path}: a parquet file is one split; drop --split")
        return datasets.Dataset.from_parquet(str(path), cache_dir=str(cache_dir) if cache_dir else None), path.parent
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


def import_hf(path: str | Path, out: str | Path, split: str | None = None, task: str | None = None,
              columns: Columns = Columns(), name: str | None = None, license: str = "unspecified",
              cache_dir: str | Path | None = None) -> DatasetCheck:
    """Make the dataset folder ``out`` from a Hugging Face dataset (:func:`open_hf`) and return its
    :func:`check_dataset`. Each column is named in ``columns`` (no guessing); an image cell is an
    ``Image`` feature's bytes (written as they are: no re-encoding), raw bytes, a PIL image or a
    path (relative to the dataset's folder), or a list of those. Options and answers are read as
    :func:`parse_options` and :func:`parse_answer` read them; the task is ``task``, else ``mcq``
    for rows with options and ``vqa.open`` without. ``cache_dir``: where ``datasets`` caches a
    parquet file's Arrow copy (its default cache when None)."""
    from tqdm.auto import tqdm

    out = _fresh(out)
    ds, source = open_hf(path, split, cache_dir)
    label = Path(path).name
    have = ds.column_names
    found = DatasetCheck(Path(path))
    if columns.options is None:
        columns = Columns(columns.id, columns.image, columns.question, "options" if "options" in have else None,
                          columns.answer)
    wanted = {"id": columns.id, "image": columns.image, "question": columns.question, "options": columns.options,
              "answer": columns.answer}
    for role, column in wanted.items():
        if column and column not in have:
            found.add(label, None, column, f"no such column; the dataset has {have}; pass --{role}-column NAME"
                                           + (" (or --id-column '' to number the rows)" if role == "id" else ""))
    if not found.ok:
        raise DatasetError(found)
    items, first, names = [], {}, set()
    with staged_folder(out) as tmp:
        table = ds.with_format("arrow")  # image cells stay their stored bytes: nothing decoded, nothing re-encoded
        for start in tqdm(range(0, len(ds), HF_BATCH), desc=f"importing {label}", unit=" batches", disable=None):
            for n, row in enumerate(table[start:start + HF_BATCH].to_pylist(), start):
                def add(column, message, n=n):
                    found.add(label, n, column, message)

                rid = str(n) if not columns.id else row.get(columns.id)
                rid = str(rid) if isinstance(rid, int) and not isinstance(rid, bool) else rid
                if not isinstance(rid, str) or not rid:
                    add(columns.id, f"{rid!r} is not an id; pass --id-column of a column of unique ids, or "
                                    f"--id-column '' to number the rows")
                    continue
                if rid in first:
                    add(columns.id, f"duplicate id {rid!r} (first in row {first[rid]}); ids must be unique")
                    continue
                first[rid] = n
                cell = row.get(columns.image)
                images = []
                for k, value in enumerate(cell if isinstance(cell, list) else [cell]):
                    stem = _UNSAFE.sub("_", rid) + (f"_{k}" if isinstance(cell, list) else "")
                    stem = stem if stem not in names else f"{stem}_row{n}"  # ids 'a/b' and 'a_b' share a safe name
                    names.add(stem)
                    try:
                        images.append(_write_hf_image(value, tmp, stem, source))
                    except ValueError as e:
                        add(columns.image, str(e))
                item = _row_item(row, columns, rid, images, task, {}, add)
                if item is not None:
                    items.append(item)
        if not found.ok:
            raise DatasetError(found)  # the staged folder is removed: nothing written
        save_dataset(tmp, items, dataset_info(name or out.name, license=license, provenance={
            "importer": "python -m lib.io import-hf", "source": str(Path(path).resolve()), "split": split,
            "columns": {k: v for k, v in wanted.items() if v is not None}}))
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
        raise ValueError(f"no image in this cell (got {type(value).__name__}); give image bytes, a PIL image or a path")
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


# --- the embedded demo's photographs ----------------------------------------------------------

# Real photographs that install offline with scikit-image (loaders that need the network are left out).
SAMPLE_IMAGES = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry")


def write_sample_images(folder: str | Path, names: tuple[str, ...] = SAMPLE_IMAGES) -> list[Path]:
    """Save scikit-image's sample photographs as PNGs under ``folder``; returns their paths."""
    import numpy as np
    import skimage.data

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = folder / f"{name}.png"
        if not path.exists():
            array = getattr(skimage.data, name)()
            Image.fromarray(np.asarray(array, dtype=np.uint8)).convert("RGB").save(path)
        paths.append(path)
    return paths


# --- command line -------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """``check DIR`` (exit 1 when it has problems), ``import-csv`` and ``import-hf`` (exit 1 when
    the source or the folder made has problems, 2 on an error such as a missing file)."""
    ap = argparse.ArgumentParser(prog="python -m lib.io", description="Check a dataset folder, or make one from a "
                                                                      "CSV or a Hugging Face dataset.")
    sub = ap.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="list every problem of a dataset folder (items.jsonl, images/, dataset.json)")
    check.add_argument("folder")
    check.add_argument("--max-problems", type=int, default=MAX_PROBLEMS, help="problems listed; the rest are counted")
    for command, source in (("import-csv", "the CSV file"), ("import-hf", "a save_to_disk folder or a parquet file")):
        p = sub.add_parser(command, help=f"make a dataset folder from {source}")
        p.add_argument("source", help=source)
        p.add_argument("--out", required=True, help="the dataset folder to write (absent or empty)")
        p.add_argument("--task", help="the items' task (default: mcq for rows with options, vqa.open without)")
        p.add_argument("--name", help="the dataset's name in dataset.json (default: the --out folder's name)")
        p.add_argument("--license", default="unspecified", help="the dataset's license, for dataset.json")
    imp_csv, imp_hf = sub.choices["import-csv"], sub.choices["import-hf"]
    imp_csv.add_argument("--images-root", help="the folder image paths start from (default: the CSV's folder)")
    imp_hf.add_argument("--split", help="the split of a save_to_disk DatasetDict (needed when it holds several)")
    for role, default in (("image", "image"), ("question", "question"), ("options", None), ("answer", "answer"),
                          ("id", "id")):
        imp_hf.add_argument(f"--{role}-column", default=default,
                            help={"options": "default: 'options' where the dataset has it, else open questions",
                                  "id": "default: id; '' numbers the rows"}.get(role, f"default: {default}"))
    args = ap.parse_args(argv)
    try:
        if args.command == "check":
            found = check_dataset(args.folder, args.max_problems)
        elif args.command == "import-csv":
            found = import_csv(args.source, args.out, args.task, args.images_root, args.name, args.license)
        else:
            columns = Columns(args.id_column, args.image_column, args.question_column, args.options_column,
                              args.answer_column)
            found = import_hf(args.source, args.out, args.split, args.task, columns, args.name, args.license)
    except DatasetError as e:
        print(e)
        print(f"nothing was written to {args.out}")
        return 1
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(found)
    return 0 if found.ok else 1


if __name__ == "__main__":
    sys.exit(main())
