"""Two-panel images (YesBut): split into halves, compose side by side, the 2x2 completion grid.

The completion grid follows YesBut's appendix E (Figures 9-10): the top row holds the "yes" and
"but" cells, one of them replaced by a question mark; the bottom row holds the options "A" and "B".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

PROFILE_WIDTH = 400  # the layout check reads a copy this wide (the aspect kept)
UNIFORM_TOLERANCE = (
    16  # grey levels a gutter pixel may differ from its column's median (JPEG noise)
)
UNIFORM_SHARE = 0.95  # a gutter column: this share of its pixels within the tolerance
SEAM_FACTOR, SEAM_MIN = (
    5.0,
    12.0,
)  # a seam: the mean |step| to the next column >= both (x the median column)
SEAM_SHARPNESS, SEAM_SIDE = (
    2.5,
    3,
)  # ... and this many times the step SEAM_SIDE columns either side (a straight cut)
CENTRE = (
    0.35,
    0.65,
)  # where the layout puts the boundary of two panels side by side (share of width)
THIRDS_SLACK = 0.05  # boundaries within this share of the width of 1/3 and 2/3: three panels


class NotTwoPanels(ValueError):
    """An image the layout check found is not two panels side by side (:func:`layout`)."""


@dataclass(frozen=True)
class Layout:
    """What :func:`layout` found. ``panels``: 2 (a boundary near the middle), 3 (boundaries at the
    thirds and none near the middle) or None (no boundary anywhere near the middle: a single photo,
    or two panels whose backgrounds meet without a seam). ``cut``: where to cut (the boundary found,
    else the middle). ``evidence``: what was found, in words."""

    panels: int | None
    cut: int
    evidence: str

    @property
    def flagged(self) -> bool:
        """Not verified as two panels: for a person to check (stage 02's contact sheet)."""
        return self.panels != 2


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2], edges[1::2]))


def _uniform_runs(gray: np.ndarray) -> tuple[list[float], list[float]]:
    """On the narrow grey copy: the gutters (narrow runs of uniform columns away from the edges),
    the most contrasted with the columns on both sides first, and the uniform runs covering the
    centre; each as the share of the width its middle is at."""
    n = gray.shape[1]
    uniform = (np.abs(gray - np.median(gray, axis=0)) <= UNIFORM_TOLERANCE).mean(
        axis=0
    ) >= UNIFORM_SHARE
    runs = _runs(uniform)
    narrow = [(a, b) for a, b in runs if a > 0.02 * n and b < 0.98 * n and b - a <= 0.1 * n]
    # a gutter between panels stands out from both sides (white beside pictures); a uniform strip of
    # one picture (a night sky) runs on into similar columns: the most contrasted gutters come first
    contrast = {
        (a, b): min(
            float(np.abs(gray[:, a] - gray[:, a - 1]).mean()),
            float(np.abs(gray[:, b - 1] - gray[:, b]).mean()),
        )
        for a, b in narrow
    }
    narrow.sort(key=lambda r: -contrast[r])
    gutters = [(a + b - 1) / 2 / n for a, b in narrow]
    covering = [(a + b - 1) / 2 / n for a, b in runs if a < CENTRE[1] * n and b > CENTRE[0] * n]
    return gutters, covering


def _seams(gray_full: np.ndarray) -> list[float]:
    """The seams at full resolution (a resize blurs a one-pixel step away), as shares of the width:
    columns whose mean step to the next is an outlier and sharp against the steps beside it."""
    w = gray_full.shape[1]
    step = np.abs(np.diff(gray_full, axis=1)).mean(axis=0)
    side = np.maximum(
        np.roll(step, SEAM_SIDE), np.roll(step, -SEAM_SIDE)
    )  # a slanted edge spreads over columns
    strong = (step >= max(SEAM_MIN, SEAM_FACTOR * float(np.median(step)))) & (
        step >= SEAM_SHARPNESS * side
    )
    return list((np.flatnonzero(strong) + 1) / w)


def layout(image: Image.Image) -> Layout:
    """Check that ``image`` is two panels side by side and find where they meet.

    Hand-written (no library checks comic layouts): on a grey copy ``PROFILE_WIDTH`` wide, a column
    is uniform when nearly all its pixels (``UNIFORM_SHARE``) match its median; a narrow run of
    uniform columns away from the edges is a *gutter* (a white or black strip between panels). At
    full resolution a column is a *seam* when the mean step to the next one is an outlier and sharp
    (``SEAM_SHARPNESS`` times the steps beside it: two pictures abutting on a straight line, not the
    slanted edge of an object in a photo). Inside ``CENTRE``: a gutter, else a seam, else a wide uniform run covering
    the middle (two white stick-figure backgrounds meeting: uniform backgrounds are no evidence
    against two panels) = two panels, cut at the gutter that stands out most from the columns on
    both its sides (a uniform strip inside one picture, a night sky, does not), else at the seam or
    background nearest the middle. None there but boundaries
    near both thirds = three panels. Nothing = unverified: the layout promises two panels, so
    :func:`split` cuts at the middle unless told to refuse."""
    w, h = image.size
    grey = image.convert("L")
    gray = np.asarray(
        grey.resize((PROFILE_WIDTH, max(1, round(h * PROFILE_WIDTH / w)))), dtype=np.float32
    )
    gutters, covering = _uniform_runs(gray)
    seams = _seams(np.asarray(grey, dtype=np.float32))
    inside = lambda xs: [x for x in xs if CENTRE[0] <= x <= CENTRE[1]]
    for kind, found in (
        ("gutter", inside(gutters)),
        ("seam", inside(seams)),
        ("background", inside(covering)),
    ):
        if found:  # a gutter first, then where two pictures abut, then where two backgrounds meet
            # the most contrasted gutter; a seam or background nearest the middle
            x = found[0] if kind == "gutter" else min(found, key=lambda x: abs(x - 0.5))
            return Layout(2, int(round(x * w)), f"{kind} at {x:.0%} of the width")
    at = lambda f: any(abs(x - f) <= THIRDS_SLACK for x in gutters + seams)
    if at(1 / 3) and at(2 / 3):
        return Layout(3, w // 2, "boundaries at 1/3 and 2/3 of the width, none near the middle")
    return Layout(None, w // 2, "no gutter, seam or background near middle")


def find_gutter(image: Image.Image) -> int:
    """The x where two panels side by side meet: the boundary :func:`layout` found, else the middle."""
    return layout(image).cut


def split(
    image: Image.Image, require_two: bool = False, at: int | None = None
) -> tuple[Image.Image, Image.Image]:
    """(left, right) halves, cut where the panels meet (:func:`layout`; the middle when no boundary
    was found), or at ``at`` (a cut found before, e.g. stored by stage 01). ``require_two``: raise
    :class:`NotTwoPanels` instead for an image not verified as two panels."""
    if at is None:
        found = layout(image)
        if require_two and found.flagged:
            raise NotTwoPanels(f"not two panels side by side: {found.evidence}")
        at = found.cut
    return image.crop((0, 0, at, image.height)), image.crop((at, 0, image.width, image.height))


def _fit(image: Image.Image, height: int) -> Image.Image:
    w = max(1, round(image.width * height / image.height))
    return image.convert("RGB").resize((w, height), Image.Resampling.BICUBIC)


def compose(
    left: Image.Image,
    right: Image.Image,
    gutter: int = 8,
    height: int | None = None,
    background=(255, 255, 255),
) -> Image.Image:
    """Left and right side by side at a common height, separated by a ``gutter`` of ``background``."""
    height = height or max(left.height, right.height)
    a, b = _fit(left, height), _fit(right, height)
    out = Image.new("RGB", (a.width + gutter + b.width, height), background)
    out.paste(a, (0, 0))
    out.paste(b, (a.width + gutter, 0))
    return out


def _font(size: int):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def completion_grid(
    yes: Image.Image,
    but: Image.Image,
    option_a: Image.Image,
    option_b: Image.Image,
    missing: str,
    cell: int = 256,
    label_height: int = 28,
) -> Image.Image:
    """The 2x2 completion grid: labelled cells yes | but over A | B, with a question mark in the
    ``missing`` ("yes" or "but") cell."""
    if missing not in ("yes", "but"):
        raise ValueError(f"missing must be 'yes' or 'but', got {missing!r}")
    font, big = _font(label_height - 8), _font(cell // 2)
    grid = Image.new("RGB", (2 * cell, 2 * (cell + label_height)), "white")
    draw = ImageDraw.Draw(grid)
    cells = [
        ("yes", None if missing == "yes" else yes),
        ("but", None if missing == "but" else but),
        ("A", option_a),
        ("B", option_b),
    ]
    for i, (label, image) in enumerate(cells):
        x, y = (i % 2) * cell, (i // 2) * (cell + label_height)
        draw.text(
            (x + cell // 2, y + label_height // 2), label, fill="black", font=font, anchor="mm"
        )
        top = y + label_height
        if image is None:
            draw.text((x + cell // 2, top + cell // 2), "?", fill="black", font=big, anchor="mm")
        else:
            thumb = image.convert("RGB").copy()
            thumb.thumbnail((cell - 8, cell - 8))
            grid.paste(thumb, (x + (cell - thumb.width) // 2, top + (cell - thumb.height) // 2))
        draw.rectangle((x, top, x + cell - 1, top + cell - 1), outline="black", width=2)
    return grid
