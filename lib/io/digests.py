"""Files' SHA-256 digests, remembered.

A digest is kept under ``outputs/cache/digests/``, keyed by the file's resolved path, size and
modification time (:func:`_stat_key`): checking a file again costs a stat, and an edited file
is hashed anew.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from hashlib import sha256
from pathlib import Path

from lib.core.paths import cache_dir


def _stat_key(path: Path, kind: str, suffix: str) -> Path:
    """Where ``outputs/cache/<kind>/`` keeps what was derived from ``path`` as it is now: keyed by
    the resolved path, size and modification time (ns), so an edited file gets a new entry."""
    path = path.resolve()
    st = path.stat()
    return (
        cache_dir(kind)
        / f"{sha256(f'{path}|{st.st_size}|{st.st_mtime_ns}'.encode()).hexdigest()[:32]}{suffix}"
    )


def file_sha256(path: str | Path, remember: bool = True) -> str | None:
    """A file's SHA-256 (None when it does not exist), read in chunks; with ``remember`` kept like
    the item index (path, size, modification time): checking a large items.jsonl again costs a
    stat, not a second read of the file."""
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
