"""Stage 01's one rule for duplicates (:func:`deduplicate`): exact copies (same SHA-256) and near
copies (a perceptual-hash match confirmed by the pixels of both halves, :func:`pixel_difference`)
of an earlier record are dropped and reported with both paths and the evidence; images of
different labels and style variants of one YesBut original never are.
"""

from __future__ import annotations

from functools import lru_cache

import imagehash
import numpy as np

from lib.io.images import load_image
from lib.io.records import Record

PIXEL_BLOCK_TOLERANCE = (
    12.0  # a near copy differs by at most this much (0-255) in every 8x8 block of each half
)


@lru_cache(maxsize=64)
def _halves(path: str) -> tuple:
    """Each half of the image (cut down the middle) as a 64x64 RGB array; cached, so an image that
    is a candidate for several others is read once."""
    image = load_image(path)
    w, h = image.size
    return tuple(
        np.asarray(image.crop(box).resize((64, 64)), dtype=np.float32)
        for box in ((0, 0, w // 2, h), (w // 2, 0, w, h))
    )


def pixel_difference(a: str, b: str) -> list[float]:
    """Per half (left, right): the largest mean absolute RGB difference over the 8x8 blocks of the
    two images at 64x64 per half - small for a re-encoded or resized copy, large wherever one
    detail differs (a red light turned green, a stick figure drawn where a photo was)."""
    diffs = []
    for x, y in zip(_halves(a), _halves(b)):
        d = np.abs(x - y).reshape(8, 8, 8, 8, 3).mean(axis=(1, 3, 4))
        diffs.append(round(float(d.max()), 2))
    return diffs


def _original_of(r: Record) -> tuple | None:
    """Images made from one original (YesBut's stage-2 image and its restylings: one source, one
    timestamp) share this."""
    return (r.source, r.timestamp) if r.timestamp else None


def deduplicate(records: list[Record], near: int = 4) -> tuple[list[Record], list[dict]]:
    """Drop copies of an earlier record; each drop is reported with both paths and the evidence.

    Exact copies have the same SHA-256. A perceptual-hash match (Hamming distance <= ``near``; 0
    disables) is only a *candidate*: it is a copy when :func:`pixel_difference` stays within
    :data:`PIXEL_BLOCK_TOLERANCE` in both halves. Images of different labels, and images of one
    YesBut original in different styles, are never copies of each other (two panels in another
    style are the point of the dataset)."""
    kept, dropped, seen_sha, hashes = [], [], {}, []
    by_id = {}
    for r in records:
        first = seen_sha.get(r.sha256)
        if first is not None and by_id[first].label == r.label:
            dropped.append(
                {
                    "id": r.id,
                    "path": r.path,
                    "duplicate_of": first,
                    "duplicate_path": by_id[first].path,
                    "kind": "exact",
                    "distance": 0,
                    "pixel_difference": [0.0, 0.0],
                }
            )
            continue
        h = imagehash.hex_to_hash(r.phash)
        match = None
        for k, kh in hashes if near else ():
            other = by_id[k]
            if h - kh > near or other.label != r.label:
                continue
            if (
                _original_of(r) is not None
                and _original_of(r) == _original_of(other)
                and (r.left_style, r.right_style) != (other.left_style, other.right_style)
            ):
                continue  # a style variant of the same original
            diff = pixel_difference(other.path, r.path)
            if max(diff) <= PIXEL_BLOCK_TOLERANCE:
                match = (k, h - kh, diff)
                break
        if match:
            dropped.append(
                {
                    "id": r.id,
                    "path": r.path,
                    "duplicate_of": match[0],
                    "duplicate_path": by_id[match[0]].path,
                    "kind": "near",
                    "distance": int(match[1]),
                    "pixel_difference": match[2],
                }
            )
            continue
        seen_sha.setdefault(r.sha256, r.id)
        by_id[r.id] = r
        hashes.append((r.id, h))
        kept.append(r)
    return kept, dropped
