"""JSONL, JSON and CSV files: read, written atomically, or appended.

Whole files are written atomically (:func:`atomic_file`: a unique temporary file beside the
target, named with its host and process, flushed and fsynced, then renamed over it: a kill or a
full disk leaves the old file or the new one, and the next writer of the file removes what a dead
writer left) or appended line by line (:func:`append_jsonl`); a malformed line is reported with its
file and line number (:class:`JSONLError`). Lines are decoded a chunk at a time (:mod:`lib.io.memory`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import socket
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from lib.io.digests import _remember_digest
from lib.io.memory import CHUNK_LINES, _decode_chunk


class JSONLError(ValueError):
    """A malformed JSONL line; the message names the file and line number."""


def _malformed(path: Path, line_no: int, e: json.JSONDecodeError) -> JSONLError:
    return JSONLError(
        f"{path}:{line_no}: malformed JSON line ({e.msg} at column {e.colno}); fix or remove that line"
    )


def read_jsonl(path: str | Path) -> Iterator[dict]:
    """Yield one dict per non-empty line; a malformed line raises :class:`JSONLError`. Lines are
    read and decoded in chunks (:func:`decode_lines`)."""
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        numbered = ((n, line) for n, line in enumerate(f, 1) if line.strip())
        while chunk := list(itertools.islice(numbered, CHUNK_LINES)):
            yield from _decode_chunk(
                [line for _, line in chunk], lambda k, e: _malformed(path, chunk[k][0], e)
            )


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


def _host_tag() -> str:
    """This machine's name as it goes into a file or folder name."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40]


def _alive(pid: int) -> bool:
    """Is process ``pid`` of this host still running (or can that not be told)?"""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # another user's process, or a system that cannot tell: keep what it left
    return True


def _temporary_beside(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path``, ``.<name>.<host>-<pid>-<random>.tmp`` (the names of
    :func:`lib.io.swap.aside_folder`): the leftovers of this host's dead writers of ``path`` (a
    killed run) are removed first; a live writer's is never touched."""
    host = _host_tag()
    mine = re.compile(rf"\.{re.escape(path.name)}\.{re.escape(host)}-(\d+)-[a-z0-9_]+\.tmp")
    with os.scandir(path.parent) as entries:
        dead = [
            e.path for e in entries if (m := mine.fullmatch(e.name)) and not _alive(int(m.group(1)))
        ]
    for leftover in dead:
        Path(leftover).unlink(missing_ok=True)
    return tempfile.mkstemp(
        prefix=f".{path.name}.{host}-{os.getpid()}-", suffix=".tmp", dir=path.parent
    )


@contextmanager
def atomic_file(path: str | Path, mode: str = "wb", **kw):
    """A file object writing a unique temporary file beside ``path``; on a clean exit it is
    flushed, fsynced and renamed over ``path``, on any error (a full disk, a kill signal) removed:
    ``path`` holds its old content or the whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temporary_beside(path)
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


_LINE = json.JSONEncoder(
    ensure_ascii=False, default=str
)  # json.dumps(row, ...) without an encoder made per row


def jsonl_line(row: dict) -> bytes:
    """One row as a JSONL line, encoded: the one form every JSONL file here is written in."""
    return (_LINE.encode(row) + "\n").encode()


def _write_lines(
    path: Path, rows: Iterable[dict] | None = None, lines: Iterable[bytes] = ()
) -> tuple[int, HashingWriter]:
    n = 0
    with atomic_file(path) as f:
        out = HashingWriter(f)
        for line in map(jsonl_line, rows) if rows is not None else lines:
            out.write(line)
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


def write_lines_hashed(path: str | Path, lines: Iterable[bytes]) -> tuple[int, int, str]:
    """:func:`write_jsonl_hashed` for lines already encoded (:func:`jsonl_line`): a rewrite that
    changes a few rows of a large file copies the others as they are instead of decoding them."""
    path = Path(path)
    n, out = _write_lines(path, lines=lines)
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
