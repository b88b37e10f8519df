"""When a dataset folder is complete: what its manifest (``dataset.json``) records must hold.

``dataset.json`` is written last and records ``num_items``, ``num_images``, ``items_bytes`` and
``items_sha256`` (:func:`lib.io.datasets.save_dataset`, the importers, Scrapbook generation and
merging all write them). The rule readers apply (:func:`lib.io.datasets.scan_items`,
:func:`~lib.io.datasets.load_items`, :func:`~lib.io.datasets.read_items_at`,
:class:`~lib.io.datasets.ItemsAt`, :func:`lib.io.index.item_index`; :func:`check_complete` is the
check) is "what the manifest records must hold":

- ``"complete": false`` in ``dataset.json`` (a writer marks the folder so before it rewrites
  ``items.jsonl`` in place, and clears it by writing the manifest) -> refused: the write never finished;
- ``items_bytes`` recorded -> a shorter ``items.jsonl`` is refused (a stat, when a reader opens it);
  a longer one too, unless its first ``items_bytes`` bytes are the recorded file (their SHA-256,
  computed once and remembered): lines appended to a whole dataset are read as additions, and
  ``check`` lists the count they change;
- ``num_items`` recorded -> a reader that streams the whole file must count that many records;
- ``items_sha256`` is checked against the whole file by :func:`lib.io.check.check_dataset`
  (``python -m lib.formats check DIR``) and :func:`verify_dataset`; readers do not read the file
  twice, to stay fast;
- a folder without ``dataset.json``, or whose ``dataset.json`` records none of these (your own,
  made by hand), loads as before.

A refusal (:class:`IncompleteDataset`) names the folder and says to rerun the stage that wrote it.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from lib.io.digests import _prefix_sha256, file_sha256


def manifest_fields(num_items: int, num_images: int, items_bytes: int, items_sha256: str) -> dict:
    """What ``dataset.json`` records of a finished ``items.jsonl`` (see the module docstring)."""
    return {
        "num_items": num_items,
        "num_images": num_images,
        "items_bytes": items_bytes,
        "items_sha256": items_sha256,
    }


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
    except (
        OSError,
        ValueError,
    ):  # unreadable or no JSON: a hand-made file; `python -m lib.formats check` says so
        return {}
    if not isinstance(info, dict):
        return {}
    return {k: info[k] for k in (*MANIFEST_KEYS, "num_images", "complete", "writer") if k in info}


def _rerun(folder: Path) -> str:
    return (
        f"rerun the stage (or command) that writes {folder}; if you edited the folder by hand, run "
        f"`python -m lib.formats check {folder}` and remove num_items, items_bytes and items_sha256 from its "
        f"dataset.json"
    )


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
        raise IncompleteDataset(
            f"{folder}: dataset.json marks this dataset as being written ({writer}) and it was "
            f"never finished: its items.jsonl may be partial; {_rerun(folder)}"
        )
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
        raise IncompleteDataset(
            f"{folder}: items.jsonl holds {actual:,} bytes but dataset.json records {size:,}: the "
            f"file is partial (a killed or concurrent write, an interrupted copy); {_rerun(folder)}"
        )
    if actual > size:
        if _prefix_sha256(path, size) != m.get("items_sha256"):
            raise IncompleteDataset(
                f"{folder}: items.jsonl holds {actual:,} bytes but dataset.json records {size:,}, "
                f"and its first {size:,} bytes are not the recorded file: it was rewritten or "
                f"mixed with another write since the dataset was written; {_rerun(folder)}"
            )
        return None  # the recorded items, whole, and lines appended after them
    return n


def _count_mismatch(folder: Path, expected: int, found: int) -> IncompleteDataset:
    return IncompleteDataset(
        f"{folder}: items.jsonl holds {found:,} items but dataset.json records {expected:,}: "
        f"the file is partial (a killed or concurrent write) or changed since the dataset was "
        f"written; {_rerun(folder)}"
    )


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
    if (
        isinstance(m.get("items_sha256"), str)
        and file_sha256(path, remember=False) != m["items_sha256"]
    ):
        raise IncompleteDataset(
            f"{folder}: items.jsonl does not match the sha256 dataset.json records: it changed "
            f"since the dataset was written; {_rerun(folder)}"
        )
