"""Where objects go: the 9 absolute regions, the 8 relative positions, and seeded placement.

Choices where the paper is silent (written down here, as the issue asks):
- An object's *absolute region* is the region holding most of its bounding box. Placing an object
  "in" a region means at least 3/4 of its box area lies inside that region and the whole box
  inside the image (paper 4.3); the other objects of an image are placed only where one region
  holds at least :data:`OTHER_REGION_SHARE` of them, so none straddles a boundary ambiguously.
- Relative positions compare bounding boxes: the main object is *left* of the reference when its
  box ends before the reference's starts (``main.x1 <= ref.x0``), *above* when ``main.y1 <= ref.y0``.
  Separated on both axes: a diagonal (upper left...). Separated on one axis only, the cardinal
  relation ("left") needs the boxes to overlap on the other axis by at least
  :data:`CARDINAL_OVERLAP` of the smaller box's extent; less overlap looks diagonal to a person and
  is no relation at all (``None``): placement never produces it where a relation is asked about.
- Placement draws uniformly among valid positions with a seeded RNG and gives up after
  ``max_tries`` draws; callers count and report such failures. Nothing loops forever.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from lib.families.scrapbook.draws import free_positions
from lib.families.scrapbook.objects import vocabulary

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 (x1, y1 exclusive)
CARDINAL_OVERLAP = 0.5  # "left of" needs this much vertical overlap (share of the smaller height)
OTHER_REGION_SHARE = 2 / 3  # an object beyond main and reference lies this much in one region


def regions(width: int, height: int) -> dict[str, Box]:
    """The 3x3 grid of Figure 7, named as in ``vocabulary.yaml``."""
    xs = [0, width // 3, 2 * width // 3, width]
    ys = [0, height // 3, 2 * height // 3, height]
    names = vocabulary()["regions"]
    return {
        names[3 * r + c]: (xs[c], ys[r], xs[c + 1], ys[r + 1]) for r in range(3) for c in range(3)
    }


def region_shares(box: Box, width: int, height: int) -> dict[str, float]:
    """The share of the box inside each region."""
    return {name: inside_fraction(box, r) for name, r in regions(width, height).items()}


def region_of(box: Box, width: int, height: int) -> str:
    """The region holding most of the box (the first in reading order on a tie)."""
    shares = region_shares(box, width, height)
    return max(shares, key=shares.get)


def _overlap(a0: int, a1: int, b0: int, b1: int) -> float:
    return max(0, min(a1, b1) - max(a0, b0)) / max(1, min(a1 - a0, b1 - b0))


def relation(main: Box, ref: Box, min_overlap: float = CARDINAL_OVERLAP) -> str | None:
    """The relative position of ``main`` with respect to ``ref``; None when the boxes overlap or
    stand in no clear relation (side by side with too little overlap on the other axis)."""
    h = "left" if main[2] <= ref[0] else "right" if main[0] >= ref[2] else None
    v = "above" if main[3] <= ref[1] else "below" if main[1] >= ref[3] else None
    if h is None and v is None:
        return None
    if h is not None and v is not None:
        return {"above": "upper", "below": "lower"}[v] + " " + h
    if h is not None:
        return h if _overlap(main[1], main[3], ref[1], ref[3]) >= min_overlap else None
    return v if _overlap(main[0], main[2], ref[0], ref[2]) >= min_overlap else None


def overlaps(a: Box, b: Box, margin: int = 0) -> bool:
    return not (
        a[2] + margin <= b[0]
        or b[2] + margin <= a[0]
        or a[3] + margin <= b[1]
        or b[3] + margin <= a[1]
    )


def inside_fraction(box: Box, region: Box) -> float:
    w = max(0, min(box[2], region[2]) - max(box[0], region[0]))
    h = max(0, min(box[3], region[3]) - max(box[1], region[1]))
    return w * h / ((box[2] - box[0]) * (box[3] - box[1]))


@dataclass
class Placer:
    """Seeded placement of boxes on a ``width`` x ``height`` image."""

    width: int
    height: int
    rng: random.Random
    max_tries: int = 400
    margin: int = 4  # keep a visible gap between objects

    def place(
        self, w: int, h: int, others: list[Box], region: Box | None = None, check=None
    ) -> Box | None:
        """A box of ``w`` x ``h`` that overlaps none of ``others``, is 3/4 inside ``region`` (if
        given) and passes ``check(box)``; None after ``max_tries`` draws.

        Each try draws x then y uniformly (``randint``'s stream: ``randint(lo, hi)`` is
        ``lo + _randbelow(hi - lo + 1)``); the tries up to the check run compiled
        (:func:`lib.families.scrapbook.draws.free_positions`: the same boxes, seed for seed)."""
        if w > self.width or h > self.height:
            return None
        if region is None:
            x_lo, x_hi, y_lo, y_hi = 0, self.width - w, 0, self.height - h
        else:  # only positions that could put 3/4 of the box inside the region
            x_lo, x_hi = max(0, region[0] - w // 4), min(self.width - w, region[2] - 3 * w // 4)
            y_lo, y_hi = max(0, region[1] - h // 4), min(self.height - h, region[3] - 3 * h // 4)
            if x_lo > x_hi or y_lo > y_hi:
                return None
        found, drawn, move_on = free_positions(
            self.rng,
            (w, h),
            (x_lo, y_lo),
            (x_hi - x_lo + 1, y_hi - y_lo + 1),
            region,
            others,
            self.margin,
            self.max_tries,
        )
        for x, y, words in found:
            box = (x, y, x + w, y + h)
            if check is None or check(box):
                move_on(words)
                return box
        move_on(drawn)
        return None
