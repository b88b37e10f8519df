"""Label Studio's files, shared by every project the package builds for it (the rating project of
:mod:`lib.rating.labelstudio`, the item review of :mod:`lib.items.review`): an image as a
local-files URL under the document root (:func:`local_files_url`), the folders to connect as local
storage (:func:`served_folders`), and a JSON export read within the labels cap
(:func:`exported_tasks`), its tasks named ``FILE: task ID`` in errors (:func:`task_where`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

from lib.io.annotations import LabelsError, read_capped

LOCAL_FILES = "/data/local-files/?d="  # Label Studio's URL of a file under its document root


class LabelStudioError(ValueError):
    """A Label Studio project that cannot be made, or an export that cannot be read."""


def local_files_url(image: str | Path, document_root: str | Path) -> str:
    """Label Studio's local-files URL of ``image``, a file under ``document_root``."""
    try:
        rel = Path(image).resolve().relative_to(Path(document_root).resolve())
    except ValueError:
        raise LabelStudioError(f"{image}: not under the document root {document_root}") from None
    return LOCAL_FILES + quote(rel.as_posix(), safe="/")


def served_folders(answers: list[dict]) -> tuple[Path, list[Path]]:
    """``(document root, storages)`` of the rows' images (``image``): per dataset (``dataset``,
    else all one), the common folder of its images' folders is a storage (one inside another is
    dropped); the document root is the common folder of the storages (of one: its parent, as Label
    Studio wants a storage below its root). A root that is a filesystem root (images in unrelated
    folder trees) is refused: Label Studio would serve the whole disk."""
    folders = {}
    for a in answers:
        folders.setdefault(a.get("dataset"), []).append(str(Path(a["image"]).resolve().parent))
    found = sorted({Path(os.path.commonpath(f)) for f in folders.values()})
    storages = [s for s in found if not any(o != s and o in s.parents for o in found)]
    root = storages[0].parent if len(storages) == 1 else Path(os.path.commonpath(storages))
    if root == Path(root.anchor):
        raise LabelStudioError(
            f"the images lie in {', '.join(map(str, storages))}: Label Studio's document root "
            f"would be {root}, serving the whole disk; rate the answers of one folder tree at a "
            f"time (--dataset), or keep the datasets under one folder"
        )
    return root, storages


def exported_tasks(path: Path) -> list[dict]:
    """An export's tasks, read within the cap (:func:`lib.io.annotations.read_capped`), checked as
    a whole."""
    try:
        exported = json.loads(read_capped(path, "export").decode("utf-8"))
    except LabelsError as e:
        raise LabelStudioError(str(e)) from None
    except UnicodeDecodeError as e:
        raise LabelStudioError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except (ValueError, RecursionError) as e:  # not JSON, a number of too many digits, too deep
        raise LabelStudioError(f"{path}: not JSON ({e})") from None
    if not isinstance(exported, list) or not all(
        isinstance(t, dict) and isinstance(t.get("data"), dict) for t in exported
    ):
        raise LabelStudioError(
            f"{path}: not a Label Studio JSON export (a list of tasks with data)"
        )
    return exported


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def task_where(path: Path, i: int, task: dict) -> str:
    """``FILE: task ID``, or the task's place in the file where its id is not a whole number."""
    return f"{path}: task " + (str(task["id"]) if _whole(task.get("id")) else f"#{i + 1}")


def annotator(annotation: dict):
    """Who made an annotation: Label Studio gives a user id, or the user as an object."""
    who = annotation.get("completed_by")
    return who.get("id", who.get("email")) if isinstance(who, dict) else who
