"""Output folders that say what they are, so a command never overwrites a folder of another kind.

Every folder a command writes as a whole (a stage's folder, a dataset, a Scrapbook shard, an
imported evaluation) carries a marker, ``.vqalab.json`` (``{"kind": ...}``). Before writing into a
folder, a command asks :func:`check_ours`: a folder that does not exist, an empty one, or one
whose marker names the same kind may be (re)written; anything else - your notes, another
command's output, a folder of another kind - is refused with an error naming the folder and what
is in it, and nothing in it is touched. Folders written before markers existed are recognised by
the files their kind always holds (``legacy``), so old runs still resume.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

MARKER = ".vqalab.json"


class NotOurFolder(ValueError):
    """A command was pointed at a folder that holds something other than its own kind of output."""


def kind_of(folder: str | Path) -> str | None:
    """The kind a folder's marker names, or None (no marker, or one that cannot be read)."""
    try:
        info = json.loads((Path(folder) / MARKER).read_bytes())
    except (OSError, ValueError):
        return None
    return (
        info.get("kind") if isinstance(info, dict) and isinstance(info.get("kind"), str) else None
    )


def check_ours(folder: str | Path, kind: str, legacy: Iterable[str] = ()) -> None:
    """Refuse (:class:`NotOurFolder`) to write ``folder`` unless it is missing, empty, marked as
    ``kind``, or unmarked but holding every file of ``legacy`` (output of this kind made before
    markers). Hidden leftovers of our own (``.lock``, the marker) count as empty."""
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
    entries = sorted(p.name for p in folder.iterdir() if p.name not in (MARKER, ".lock"))
    if found is None and not entries:
        return
    legacy = tuple(legacy)
    if found is None and legacy and all((folder / name).exists() for name in legacy):
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
