"""Two-panel images (YesBut): split into halves, compose side by side, the 2x2 completion grid.

The completion grid follows YesBut's appendix E (Figures 9-10): the top row holds the "yes" and
"but" cells, one of them replaced by a question mark; the bottom row holds the options "A" and "B".
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont


def find_gutter(image: Image.Image, search: float = 0.2, min_contrast: float = 12.0) -> int:
    """The x of the vertical separator between the halves: the most uniform column band near the
    middle (``search`` of the width either side), if it stands out from its neighbourhood by
    ``min_contrast`` grey levels of column variance; else the middle."""
    gray = np.asarray(image.convert("L"), dtype=np.float32)
    w = gray.shape[1]
    mid = w // 2
    lo, hi = max(1, int(mid - search * w)), min(w - 1, int(mid + search * w))
    spread = gray.std(axis=0)
    band = spread[lo:hi]
    if band.size == 0:
        return mid
    best = int(np.argmin(band)) + lo
    if np.median(spread[lo:hi]) - spread[best] < min_contrast:
        return mid
    # the centre of the run of near-minimal columns (a gutter is usually several pixels wide)
    run = np.flatnonzero(spread[lo:hi] <= spread[best] + 1.0) + lo
    near = run[np.abs(run - best) <= max(2, w // 50)]
    return int(near.mean().round())


def split(image: Image.Image) -> tuple[Image.Image, Image.Image]:
    """(left, right) halves, cut at the detected gutter (or the middle)."""
    x = find_gutter(image)
    return image.crop((0, 0, x, image.height)), image.crop((x, 0, image.width, image.height))


def _fit(image: Image.Image, height: int) -> Image.Image:
    w = max(1, round(image.width * height / image.height))
    return image.convert("RGB").resize((w, height), Image.Resampling.BICUBIC)


def compose(left: Image.Image, right: Image.Image, gutter: int = 8, height: int | None = None,
            background=(255, 255, 255)) -> Image.Image:
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


def completion_grid(yes: Image.Image, but: Image.Image, option_a: Image.Image, option_b: Image.Image,
                    missing: str, cell: int = 256, label_height: int = 28) -> Image.Image:
    """The 2x2 completion grid: labelled cells yes | but over A | B, with a question mark in the
    ``missing`` ("yes" or "but") cell."""
    if missing not in ("yes", "but"):
        raise ValueError(f"missing must be 'yes' or 'but', got {missing!r}")
    font, big = _font(label_height - 8), _font(cell // 2)
    grid = Image.new("RGB", (2 * cell, 2 * (cell + label_height)), "white")
    draw = ImageDraw.Draw(grid)
    cells = [("yes", None if missing == "yes" else yes), ("but", None if missing == "but" else but),
             ("A", option_a), ("B", option_b)]
    for i, (label, image) in enumerate(cells):
        x, y = (i % 2) * cell, (i // 2) * (cell + label_height)
        draw.text((x + cell // 2, y + label_height // 2), label, fill="black", font=font, anchor="mm")
        top = y + label_height
        if image is None:
            draw.text((x + cell // 2, top + cell // 2), "?", fill="black", font=big, anchor="mm")
        else:
            thumb = image.convert("RGB").copy()
            thumb.thumbnail((cell - 8, cell - 8))
            grid.paste(thumb, (x + (cell - thumb.width) // 2, top + (cell - thumb.height) // 2))
        draw.rectangle((x, top, x + cell - 1, top + cell - 1), outline="black", width=2)
    return grid
