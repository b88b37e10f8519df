"""Output folders that say what they are, so a command never overwrites a folder of another kind.

Every folder a command writes as a whole (a stage's folder, a dataset, a Scrapbook shard, an
imported evaluation, a comparison) carries a marker, ``.vqalab.json`` (``{"kind": ...}``), read
without following links: a marker that is a link (to another folder's marker) is no marker. Before
writing into a folder, a command asks :func:`check_ours`: a folder that does not exist, an empty
one, or one whose marker names the same kind may be (re)written; anything else - your notes,
another command's output, a folder of another kind - is refused with an error naming the folder
and what is in it, and nothing in it is touched. A stage claims its folder (:func:`claim_stage`)
before it writes: checked, then marked ``stage <name>``.

Folders written before markers existed are recognised exactly, so old runs still resume: a kind's
:class:`Legacy` names every entry such a folder may hold and the record in it that says who made
it (a Scrapbook dataset's ``dataset.json`` names ``scrapbook``); an unmarked stage folder is its
stage's only where a run keeps it, ``<outputs>/<run>/<stage>/``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lib.core.paths import outputs_root

MARKER = ".vqalab.json"
HIDDEN = (MARKER, ".lock")  # our own leftovers: a folder holding only these is empty
RECORD_LIMIT = 1 << 20  # a marker or a legacy record larger than this is not ours


def hidden(name: str) -> bool:
    """Is ``name`` a leftover of our own: the marker, the lock, or a marker being written
    (:func:`mark`'s temporary file, which a job's other rank checking the folder at that moment
    sees; a stale one from a killed writer is nothing either)?"""
    return name in HIDDEN or re.fullmatch(rf"{re.escape(MARKER)}\.\d+\.tmp", name) is not None


class NotOurFolder(ValueError):
    """A command was pointed at a folder that holds something other than its own kind of output."""


def _own_json(path: Path):
    """The JSON in ``path`` if it is a regular file of its own (not a link), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:  # missing, or a link (ELOOP)
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(RECORD_LIMIT + 1)
    try:
        return json.loads(data) if len(data) <= RECORD_LIMIT else None
    except ValueError:
        return None


def kind_of(folder: str | Path) -> str | None:
    """The kind a folder's marker names, or None (no marker, a link, or one that cannot be read)."""
    info = _own_json(Path(folder) / MARKER)
    return (
        info.get("kind") if isinstance(info, dict) and isinstance(info.get("kind"), str) else None
    )


@dataclass(frozen=True)
class Legacy:
    """An unmarked folder of one kind, written before markers: every entry is one that kind writes
    (a name of ``names``, or one matching a pattern of ``patterns``, never a link), and, where
    ``says`` is given as ``(file, key, value)``, that JSON file of it holds ``key: value``."""

    names: tuple[str, ...]
    patterns: tuple[str, ...] = ()
    says: tuple[str, str, str] | None = None

    def __call__(self, folder: Path) -> bool:
        for p in folder.iterdir():
            if hidden(p.name) and not p.is_symlink():
                continue
            known = p.name in self.names or any(fnmatch.fnmatch(p.name, g) for g in self.patterns)
            if not known or p.is_symlink():
                return False
        if self.says is None:
            return True
        name, key, value = self.says
        record = _own_json(folder / name)
        return isinstance(record, dict) and record.get(key) == value


def check_ours(folder: str | Path, kind: str, legacy: Callable[[Path], bool] | None = None) -> None:
    """Refuse (:class:`NotOurFolder`) to write ``folder`` unless it is missing, empty, marked as
    ``kind``, or unmarked and ``legacy(folder)`` says it is output of this kind made before markers
    (:class:`Legacy`). Hidden leftovers of our own (``.lock``, the marker) count as empty; a marker
    that is a link counts as an entry of someone else's."""
    folder = Path(folder)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise NotOurFolder(
            f"{folder} is not a folder (a file or a link): choose a new folder for the {kind}"
        )
    if not folder.exists():
        return
    found = kind_of(folder)
    if found == kind:
        return
    entries = sorted(p.name for p in folder.iterdir() if not hidden(p.name) or p.is_symlink())
    if found is None and not entries:
        return
    if found is None and legacy is not None and legacy(folder):
        return
    what = (
        f"a {found}"
        if found
        else f"{len(entries)} entries not made by this command ({', '.join(entries[:5])}"
        + (", ..." if len(entries) > 5 else "")
        + ")"
    )
    raise NotOurFolder(
        f"{folder} holds {what}, not a {kind}: nothing was written; choose a new or empty folder, "
        f"or remove that one yourself"
    )


def mark(folder: str | Path, kind: str) -> None:
    """Write the marker that names ``folder``'s kind (atomically: a reader sees the old or the new)."""
    folder = Path(folder)
    tmp = folder / f"{MARKER}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"kind": kind}) + "\n")
    os.replace(tmp, folder / MARKER)


def stage_kind(stage: str) -> str:
    """The kind a stage's folder is marked with."""
    return f"stage {stage}"


def run_stage_folder(folder: Path, stage: str) -> bool:
    """Is ``folder`` where a run keeps ``stage`` (``<outputs>/<run>/<stage>``)? An unmarked folder
    there is that stage's, written before stage folders were marked."""
    return folder.name == stage and folder.parent.resolve().parent == outputs_root()


def claim_stage(out: str | Path, stage: str, write: bool = True) -> None:
    """Check that ``out`` may be ``stage``'s folder (:func:`check_ours`: new, empty, marked as that
    stage's, or an unmarked one where a run keeps it) and, with ``write``, create and mark it."""
    out = Path(out)
    check_ours(out, stage_kind(stage), legacy=lambda f: run_stage_folder(f, stage))
    if write:
        out.mkdir(parents=True, exist_ok=True)
        mark(out, stage_kind(stage))


def mark_stage(out: str | Path, stage: str) -> None:
    """Mark ``out`` as ``stage``'s folder once the stage has written in it (finished or not, so a
    stopped run resumes); nothing is created, and a folder marked otherwise meanwhile is left."""
    out = Path(out)
    if (
        out.is_dir()
        and not out.is_symlink()
        and kind_of(out) is None
        and any(not hidden(p.name) for p in out.iterdir())
    ):
        mark(out, stage_kind(stage))


@contextmanager
def claimed(out: str | Path, stage: str, mark: bool = True) -> Iterator[Path]:
    """A block that writes ``stage``'s folder ``out``, once it is checked to be that stage's
    (:func:`claim_stage`: a folder of another kind raises :class:`NotOurFolder`, untouched). With
    ``mark`` (not a job's other ranks, which write under the main one) the folder is made and
    marked first, so a run killed part way is resumed into it; one the block made and left empty
    on an error (an input refused) is removed again: nothing is left of a refused run."""
    out = Path(out)
    made = mark and not out.exists()
    claim_stage(out, stage, write=mark)
    try:
        yield out
    except BaseException:
        if made and out.is_dir() and all(hidden(p.name) for p in out.iterdir()):
            shutil.rmtree(out)
        raise


def remove_ours(
    folder: str | Path, kind: str, legacy: Callable[[Path], bool] | None = None
) -> None:
    """Remove ``folder`` (a sub-folder a command rewrites, or drops when it has nothing to show)
    only if it is ours (:func:`check_ours`); anything else is refused and left as it is."""
    folder = Path(folder)
    check_ours(folder, kind, legacy)
    if folder.exists():
        shutil.rmtree(folder)
