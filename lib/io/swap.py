"""Folders built aside and swapped in whole.

A folder is built under a name no other run uses (:func:`aside_folder`:
``.<name>.building-<host>-<pid>-<random>``) and swapped in whole (:func:`swap_in`): two runs
building one dataset never share a temporary folder, and a swap deletes only what it built and
the previous complete version it replaces.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import secrets
import shutil
from pathlib import Path

from lib.io.jsonl import _alive, _fsync_dir, _host_tag


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


@functools.cache
def _renameat2():
    """glibc's ``renameat2`` (Linux, glibc >= 2.28), or None."""
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
    raise OSError(
        f"{out}: could not swap in {new} ({tries} concurrent swaps in a row); it is kept there"
    )
