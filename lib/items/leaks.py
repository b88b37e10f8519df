"""Images that leak: near copies of an image within a dataset, across its splits and across
datasets, and the questions that repeat on them.

    pairs = image_leaks({"train": train_paths, "dev": dev_paths, "yesbut": other_paths})
    repeats = repeated_questions({"train": train_items, "dev": dev_items}, roots, pairs)

Where stage 01's :func:`lib.io.duplicates.deduplicate` drops copies inside one collection as it
is made, this compares finished datasets with each other, and looks through the edits a copy
picks up on its way into another split: resizing, recompression, mirroring, cropping, recolouring.

Each image is looked at in :data:`VIEWS`: itself, mirrored, and five crops of :data:`CROP` of its
sides (centre and corners). Two images are a *candidate* when the perceptual hash (``phash``, 64
bits) of one is within :data:`NEAR` bits of any view's hash of the other. The hash alone cannot
tell a copy from a sibling: Scrapbook's images of one scene on one photograph differ by an object
a tenth of the image wide, and hash 0 bits apart. So a candidate is a copy only when the two
images, aligned by the view that matched, agree block by block (:func:`block_difference`: the
largest mean absolute difference over 16 x 16 blocks at 128 x 128) in brightness (HSV value,
which a hue shift leaves alone) within :data:`TOLERANCE`; it is a ``recoloured`` copy when its
colours (RGB) differ by more.

A second signal for crops and recolourings, an image embedding, is not used: the project's only
embedding without weights (the colour + HOG descriptor of :mod:`lib.pages.embeddings`) lives in a
layer above this one and moves with every colour change; the crop views and the hue-free
brightness comparison stand in for it. What they do not find: crops that keep much less than
:data:`CROP` of an image or cut it off-centre by other amounts, rotations, and recolourings that
change brightness (not only hue).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

import imagehash
import numpy as np
import pandas as pd
from PIL import Image, ImageOps

from lib.io import file_sha256, load_image

CROP = 0.9  # the crop views keep this share of each side
VIEWS = ("image", "mirrored", "crop centre", "crop top left", "crop top right")
VIEWS += ("crop bottom left", "crop bottom right")
# Hash bits apart for a candidate. Measured on scikit-image photographs: every planted copy (50%
# resize, JPEG q=30, 90% crop, mirror, hue shift) within 4 bits in its best view; different
# photographs at least 22 apart (in any view).
NEAR = 10
# Brightness block difference (0-255) for a copy: the planted copies differ by at most 6, images of
# one Scrapbook scene by at least 14.
TOLERANCE = 10.0
SIZE, BLOCKS = 128, 16  # compared at SIZE x SIZE in BLOCKS x BLOCKS blocks of 8 x 8 pixels
COLUMNS = ("a", "b", "split_a", "split_b", "scope", "kind", "view", "distance", "difference")


def view(image: Image.Image, name: str) -> Image.Image:
    """One of :data:`VIEWS` of ``image``."""
    if name == "image":
        return image
    if name == "mirrored":
        return ImageOps.mirror(image)
    w, h = image.size
    cw, ch = round(w * CROP), round(h * CROP)
    x = {"centre": (w - cw) // 2, "left": 0, "right": w - cw}
    y = {"centre": (h - ch) // 2, "top": 0, "bottom": h - ch}
    where = name.removeprefix("crop ").split()
    left, top = (x["centre"], y["centre"]) if where == ["centre"] else (x[where[1]], y[where[0]])
    return image.crop((left, top, left + cw, top + ch))


def _bits(image: Image.Image) -> np.uint64:
    flat = imagehash.phash(image).hash.ravel()
    return np.uint64(int("".join("1" if b else "0" for b in flat), 2))


@lru_cache(maxsize=32)  # a candidate's images, read once for its views and checks
def _image(path: str) -> Image.Image:
    return load_image(path)


def fingerprints(paths: Iterable[Path]) -> tuple[list[str], np.ndarray]:
    """Each file's SHA-256 and its views' phashes (one row per image, one column per view)."""
    shas, rows = [], []
    for p in paths:
        image = _image(str(p))
        shas.append(file_sha256(p))
        rows.append([_bits(view(image, name)) for name in VIEWS])
    return shas, np.asarray(rows, dtype=np.uint64).reshape(-1, len(VIEWS))


def candidates(hashes: np.ndarray, near: int, block: int = 256) -> dict[tuple, tuple]:
    """(i, j) with i < j -> (first, second, bits apart, view index) for every pair whose nearest
    view is within ``near`` bits: ``second``'s view ``VIEWS[view]`` nearest ``first``'s image.
    Computed in blocks of rows, so memory stays at block x n x views bytes."""
    found: dict[tuple, tuple] = {}
    for start in range(0, len(hashes), block):
        own = hashes[start : start + block, None, :1]  # each row's image itself
        d = np.bitwise_count(own ^ hashes[None, :, :])  # (block, n, views)
        nearest, which = d.min(axis=2), d.argmin(axis=2)
        for r, j in zip(*np.nonzero(nearest <= near)):
            i = start + int(r)
            if i == j:
                continue
            key, hit = (min(i, j), max(i, j)), (i, int(j), int(nearest[r, j]), int(which[r, j]))
            if key not in found or hit[2] < found[key][2]:
                found[key] = hit
    return found


def _brightness(image: Image.Image) -> np.ndarray:
    return np.asarray(image.resize((SIZE, SIZE), Image.BILINEAR).convert("HSV"), float)[..., 2:]


def _colours(image: Image.Image) -> np.ndarray:
    return np.asarray(image.resize((SIZE, SIZE), Image.BILINEAR).convert("RGB"), dtype=float)


def block_difference(a: np.ndarray, b: np.ndarray) -> float:
    """The largest mean absolute difference over :data:`BLOCKS` x :data:`BLOCKS` blocks of two
    SIZE x SIZE arrays (channels last): small for a copy, large wherever one detail differs."""
    k = SIZE // BLOCKS
    d = np.abs(a - b).reshape(BLOCKS, k, BLOCKS, k, -1).mean(axis=(1, 3, 4))
    return round(float(d.max()), 2)


def confirm(a: str, b: str, name: str, tolerance: float = TOLERANCE) -> tuple | None:
    """(kind, brightness difference) when ``a`` and the ``name`` view of ``b`` are one image
    (within ``tolerance``), else None."""
    x, y = _image(a), view(_image(b), name)
    bright = block_difference(_brightness(x), _brightness(y))
    if bright > tolerance:
        return None
    if block_difference(_colours(x), _colours(y)) > tolerance:
        return "recoloured", bright
    return {"image": "near", "mirrored": "mirrored"}.get(name, "cropped"), bright


def _pair(paths, splits, i: int, j: int, kind: str, name: str, dist: int, diff: float) -> dict:
    return {
        "a": str(paths[i]),
        "b": str(paths[j]),
        "split_a": splits[i],
        "split_b": splits[j],
        "scope": "within" if splits[i] == splits[j] else "across",
        "kind": kind,
        "view": name,
        "distance": int(dist),
        "difference": diff,
    }


def image_leaks(
    named: Mapping[str, Iterable[Path]], near: int = NEAR, tolerance: float = TOLERANCE
) -> pd.DataFrame:
    """Every pair of copies among the named image lists (split or dataset -> paths), each once:
    ``exact`` (same bytes), or a hash candidate within ``near`` bits confirmed by its pixels
    (:func:`confirm`, ``tolerance``): ``near``, ``mirrored``, ``cropped`` or ``recoloured``.
    ``view`` is the view of ``b`` that matched ``a``; ``distance`` its hash bits apart;
    ``difference`` the brightness block difference; ``scope`` within one list or across two."""
    paths = [Path(p) for group in named.values() for p in group]
    splits = [name for name, group in named.items() for _ in group]
    shas, hashes = fingerprints(paths)
    rows = []
    for (i, j), (first, second, bits, k) in sorted(candidates(hashes, near).items()):
        if shas[i] == shas[j]:
            rows.append(_pair(paths, splits, i, j, "exact", "image", 0, 0.0))
        elif found := confirm(str(paths[first]), str(paths[second]), VIEWS[k], tolerance):
            rows.append(_pair(paths, splits, first, second, found[0], VIEWS[k], bits, found[1]))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def normalised(question: str) -> str:
    """A question as compared across splits: lower case, punctuation dropped, spaces collapsed."""
    return " ".join(re.sub(r"[^\w\s]", " ", question.lower()).split())


def repeated_questions(
    items: Mapping[str, Iterable], roots: Mapping[str, Path], leaks: pd.DataFrame
) -> pd.DataFrame:
    """Pairs of items in different splits asking the same (:func:`normalised`) question of one
    image: the same file, or two images ``leaks`` (:func:`image_leaks`) pairs. ``roots`` holds
    each split's dataset folder, against which its items' image paths are read."""
    same = {(r.a, r.b) for r in leaks.itertuples()} | {(r.b, r.a) for r in leaks.itertuples()}
    by_question: dict[str, list] = {}
    for split, group in items.items():
        for it in group:
            image = str(Path(roots[split]) / it.images[0]) if it.images else ""
            by_question.setdefault(normalised(it.question), []).append((split, it.id, image))
    rows = []
    for question, asked in by_question.items():
        for n, (split_a, id_a, image_a) in enumerate(asked):
            for split_b, id_b, image_b in asked[n + 1 :]:
                if split_a == split_b or not image_a:
                    continue
                if image_a == image_b or (image_a, image_b) in same:
                    kind = "same image" if image_a == image_b else "copied image"
                    rows.append((id_a, id_b, split_a, split_b, kind, question))
    columns = ["item_a", "item_b", "split_a", "split_b", "kind", "question"]
    return pd.DataFrame(rows, columns=columns)
