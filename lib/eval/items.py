"""Which questions an evaluation asks: each dataset's items, checked (unique ids, readable images
inside the folder), filtered by task and sampled to ``max_items`` in one streaming pass that keeps
offsets, not questions (:class:`lib.io.ItemsAt` reads them back when asked)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from lib.core.schema import Item
from lib.eval.settings import EvalConfig
from lib.io import ItemsAt, outside_images, release_memory, save_item_index, scan_items
from lib.tasks.registry import task_of

UNIT_HASH_BITS = 2**63 - 1  # a sampling unit's code: its hash, non-negative


def load_eval_items(cfg: EvalConfig) -> dict[str, tuple[Path, ItemsAt]]:
    """Each dataset's folder and the items to ask (filtered by task, sampled to ``max_items``),
    read when asked for (:class:`lib.io.ItemsAt`). The file is streamed once: a sample keeps only
    each candidate's offset, unit and rank (a small sample of a paper-scale Scrapbook set never
    holds the rest), and no evaluation holds its questions while it asks them."""
    out = {}
    for name, folder in cfg.datasets.items():
        folder = Path(folder)
        if not (folder / "items.jsonl").exists():
            raise FileNotFoundError(
                f"dataset {name!r}: {folder}/items.jsonl not found (check the `datasets` parameter)"
            )
        items, uses = _select_items(name, folder, cfg)
        # the pass's garbage, before a model is loaded beside it: records and buffers, no cycles,
        # so no collector's pass (lib.io.memory)
        release_memory(collect=False)
        _check_images(name, folder, uses if uses is not None else _image_uses(items))
        out[name] = (folder, items)
    return out


def _image_uses(items: Iterable[Item], uses: dict[str, str] | None = None) -> dict[str, str]:
    """Each distinct image path of ``items`` -> the id of the first item that uses it (added to ``uses``)."""
    uses = {} if uses is None else uses
    for it in items:
        for im in it.images:
            uses.setdefault(im, it.id)
    return uses


def _check_images(name: str, folder: Path, uses: dict[str, str]) -> None:
    """Refuse, before any model is called (not as a bare error an hour into the run), image paths
    that leave the dataset folder undeclared and images that are not files, each named with the
    first item that uses it (``uses``: :func:`_image_uses`). Each distinct path is checked once
    (a Scrapbook set asks many questions of each image)."""
    outside = outside_images(folder, ((i, im) for im, i in uses.items()))
    if outside:
        listed = "; ".join(f"{i}: {im}" for i, im in outside[:5])
        raise ValueError(
            f"dataset {name!r} ({folder}): {len(outside)} image path(s) leave the dataset folder and "
            f"no images_roots in its dataset.json covers them: {listed}"
            f"{' ...' if len(outside) > 5 else ''}"
        )
    bad = [
        (i, im, "missing" if not (folder / im).exists() else "not a file")
        for im, i in uses.items()
        if not (folder / im).is_file()
    ]
    if bad:
        listed = "; ".join(f"{i}: {im} ({why})" for i, im, why in bad[:5])
        raise ValueError(
            f"dataset {name!r} ({folder}): {len(bad)} image(s) of its items cannot be read: {listed}"
            f"{' ...' if len(bad) > 5 else ''}"
        )


def _select_items(
    name: str, folder: Path, cfg: EvalConfig
) -> tuple[ItemsAt, dict[str, str] | None]:
    """One streaming pass: unique ids checked, the task filter applied, the offset of every item
    kept and its images' uses (:func:`_image_uses`) when there is no ``max_items``, else what
    :func:`sample_indices` needs (uses None: the sample is read for them); the id index is
    saved for rescoring (:class:`lib.io.IdLookup`). Per line it keeps flat bytes and numbers, not
    Python objects, so a paper-scale pass costs bytes per question, not an object each. A
    sampling unit is coded by its hash (:data:`UNIT_HASH_BITS`) rather than kept as a Python key
    (tens of thousands of them stayed resident after the pass); two units whose 63-bit hashes
    collide (rare even at paper scale) would only be drawn together."""
    ids = bytearray()  # newline-joined, as the index stores them
    hashes, offsets, cand_offsets, units, ranks = (
        array("q"),
        array("q"),
        array("q"),
        array("q"),
        array("d"),
    )
    uses: dict[str, str] = {}
    for off, it in scan_items(folder, share=False):
        ids += it.id.encode() + b"\n"
        hashes.append(hash(it.id))
        offsets.append(off)
        if cfg.only_tasks and it.task not in cfg.only_tasks:
            continue
        cand_offsets.append(off)
        if not cfg.max_items:
            _image_uses((it,), uses)
        else:
            unit = task_of(it).unit(it)
            units.append(-1 if unit is None else hash(unit.key) & UNIT_HASH_BITS)
            ranks.append(0 if unit is None else unit.order)
    if len(np.unique(np.frombuffer(hashes, dtype=np.int64))) < len(
        hashes
    ):  # a repeated id, or a hash collision
        _refuse_duplicate_ids(name, folder, ids.decode().split("\n")[:-1])
    save_item_index(folder, bytes(ids[:-1]), offsets)
    del ids, hashes, offsets
    if not cfg.max_items:
        return ItemsAt(folder, cand_offsets, share=False), uses
    picked = sample_indices(units, ranks, cfg.max_items, cfg.seed)
    return ItemsAt(folder, [cand_offsets[i] for i in picked], share=False), None


def _refuse_duplicate_ids(name: str, folder: Path, ids: list[str]) -> None:
    """Ids must be unique within a dataset: the first repeated one is named with both its records."""
    seen: dict[str, int] = {}
    for record, i in enumerate(ids, start=1):
        if i in seen:
            raise ValueError(
                f"dataset {name!r}: {folder}/items.jsonl has id {i!r} twice (records {seen[i]} "
                f"and {record}); ids must be unique within a dataset"
            )
        seen[i] = record


def item_key(dataset: str, item_id: str) -> tuple[str, str]:
    """An item's identity: (dataset, id). Two datasets may share ids, never a dataset."""
    return dataset, item_id


def sample_indices(units, ranks, max_items: int, seed: int) -> list[int]:
    """Which of n candidates (in file order) a sample of at most ``max_items`` keeps, drawn with
    ``seed``. Candidates their task scores together (:meth:`Task.unit`: here a non-negative
    integer per unit, or None / -1 for none) are drawn by unit, lowest ``ranks`` (the units'
    ``order``) first, randomly within a rank: Scrapbook's units are one query on one image chain
    with every version, so the protocol's consistency and precedence checks stay whole and level
    gating starts from level 1. Units are grouped with numpy (a paper-scale pass has tens of thousands)."""
    n_items = len(units)
    if not max_items or n_items <= max_items:
        return list(range(n_items))
    rng = np.random.default_rng(seed)
    codes = np.fromiter((-1 if u is None else u for u in units), dtype=np.int64, count=n_items)
    if (codes >= 0).all():
        _, first, inverse, sizes = np.unique(
            codes, return_index=True, return_inverse=True, return_counts=True
        )
        by_appearance = np.argsort(first, kind="stable")  # units in the order they first appear
        r = rng.random(len(first))
        rank = np.asarray(ranks, dtype=float)[first[by_appearance]]
        order = by_appearance[np.lexsort((r, rank))]  # lowest rank first, randomly within a rank
        keep, n = np.zeros(len(first), dtype=bool), 0
        for g in order.tolist():
            if n + sizes[g] <= max_items:
                keep[g] = True
                n += sizes[g]
        return np.flatnonzero(keep[inverse]).tolist()
    return sorted(int(i) for i in rng.choice(n_items, size=max_items, replace=False))
