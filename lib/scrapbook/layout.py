"""Where objects go: the 9 absolute regions, the 8 relative positions, and seeded placement.

Choices where the paper is silent (written down here, as the issue asks):
- An object's *absolute region* is the region holding its bounding-box centre. Placing an object
  "in" a region means at least 3/4 of its box area lies inside that region and the whole box
  inside the image (paper 4.3).
- Relative positions compare bounding boxes: the main object is *left* of the reference when its
  box ends before the reference's starts (``main.x1 <= ref.x0``), *above* when ``main.y1 <= ref.y0``,
  and so on; the eight positions are the combinations (upper left = left and above; left = left
  and overlapping vertically...). Two non-overlapping boxes always stand in exactly one of them.
- Placement draws uniformly among valid positions with a seeded RNG and gives up after
  ``max_tries`` draws; callers count and report such failures. Nothing loops forever.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from lib.scrapbook.objects import vocabulary

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 (x1, y1 exclusive)


def regions(width: int, height: int) -> dict[str, Box]:
    """The 3x3 grid of Figure 7, named as in ``vocabulary.yaml``."""
    xs = [0, width // 3, 2 * width // 3, width]
    ys = [0, height // 3, 2 * height // 3, height]
    names = vocabulary()["regions"]
    return {names[3 * r + c]: (xs[c], ys[r], xs[c + 1], ys[r + 1]) for r in range(3) for c in range(3)}


def region_of(box: Box, width: int, height: int) -> str:
    """The region holding the box centre."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    col = min(2, int(cx * 3 // width))
    row = min(2, int(cy * 3 // height))
    return vocabulary()["regions"][3 * row + col]


def relation(main: Box, ref: Box) -> str | None:
    """The relative position of ``main`` with respect to ``ref`` (None when the boxes overlap)."""
    h = "left" if main[2] <= ref[0] else "right" if main[0] >= ref[2] else None
    v = "above" if main[3] <= ref[1] else "below" if main[1] >= ref[3] else None
    if h is None and v is None:
        return None
    if v is None:
        return h
    if h is None:
        return v
    return {"above": "upper", "below": "lower"}[v] + " " + h


def overlaps(a: Box, b: Box, margin: int = 0) -> bool:
    return not (a[2] + margin <= b[0] or b[2] + margin <= a[0] or a[3] + margin <= b[1] or b[3] + margin <= a[1])


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

    def _candidates(self, w: int, h: int, region: Box | None):
        if w > self.width or h > self.height:
            return
        if region is None:
            x_lo, x_hi, y_lo, y_hi = 0, self.width - w, 0, self.height - h
        else:  # only positions that could put 3/4 of the box inside the region
            x_lo, x_hi = max(0, region[0] - w // 4), min(self.width - w, region[2] - 3 * w // 4)
            y_lo, y_hi = max(0, region[1] - h // 4), min(self.height - h, region[3] - 3 * h // 4)
            if x_lo > x_hi or y_lo > y_hi:
                return
        for _ in range(self.max_tries):
            x, y = self.rng.randint(x_lo, x_hi), self.rng.randint(y_lo, y_hi)
            yield (x, y, x + w, y + h)

    def place(self, w: int, h: int, others: list[Box], region: Box | None = None, check=None) -> Box | None:
        """A box of ``w`` x ``h`` that overlaps none of ``others``, is 3/4 inside ``region`` (if
        given) and passes ``check(box)``; None after ``max_tries`` draws."""
        for box in self._candidates(w, h, region):
            if region is not None and inside_fraction(box, region) < 0.75:
                continue
            if any(overlaps(box, o, self.margin) for o in others):
                continue
            if check is not None and not check(box):
                continue
            return box
        return None
