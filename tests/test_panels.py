"""Two-panel tools: the layout check (gutter, seam, shared background; three panels and single
photos flagged, never cut), the cut, the 2x2 grid."""

import numpy as np
import pytest
from PIL import Image

from lib.families.yesbut import panels


def _photo(seed, size=(90, 120)):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def test_split_finds_the_gutter_of_a_composed_pair():
    left, right = _photo(0, (90, 120)), _photo(1, (150, 120))
    pair = panels.compose(left, right, gutter=10)
    assert pair.size == (90 + 10 + 150, 120)
    x = panels.find_gutter(pair)
    assert 90 <= x <= 100  # inside the white gutter, not at the middle (125)
    a, b = panels.split(pair)
    assert a.width + b.width == pair.width and abs(a.width - 95) <= 5


def _smooth(seed, size, slant=0.4):
    """A photo-like picture without straight vertical edges: smooth gradients plus a slanted edge."""
    w, h = size
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = (
        50
        + 40 * np.sin(x / (w / rng.uniform(1.5, 3))) * np.cos(y / (h / rng.uniform(1.5, 3)))
        + 120 * y / h
    )
    base += np.where(x > w * 0.55 + slant * (y - h / 2), 50, 0)  # an object's slanted edge
    return Image.fromarray(np.clip(np.stack([base] * 3, -1), 0, 255).astype(np.uint8))


def _stick(seed, size):
    """A black stick figure on white (the stage-3 style): mostly white columns."""
    w, h = size
    a = np.full((h, w, 3), 255, np.uint8)
    rng = np.random.default_rng(seed)
    cx = int(rng.integers(w // 3, 2 * w // 3))
    a[h // 4 : 3 * h // 4, cx - 2 : cx + 2] = 0
    a[h // 4 - 10 : h // 4, cx - 8 : cx + 8] = 0
    return Image.fromarray(a)


def test_split_without_a_gutter_cuts_in_the_middle():
    noise = _photo(2, (200, 100))
    assert panels.find_gutter(noise) == 100


@pytest.mark.parametrize("case", ["gutter", "seam", "white backgrounds", "uneven halves"])
def test_two_panels_are_verified_and_cut_where_they_meet(case):
    if case == "gutter":
        image, meet = (
            panels.compose(_photo(0, (90, 120)), _photo(1, (110, 120)), gutter=6),
            (90, 96),
        )
    elif case == "seam":  # two pictures abutting, no gutter (stage-3/4 compositions)
        image, meet = (
            panels.compose(_smooth(0, (100, 120)), _smooth(1, (100, 120)), gutter=0),
            (99, 101),
        )
    elif (
        case == "white backgrounds"
    ):  # two stick figures: white meets white (the old check's failure)
        image, meet = (
            panels.compose(_stick(0, (100, 120)), _stick(1, (100, 120)), gutter=0),
            (60, 140),
        )
    else:  # an ORIG half narrower than the generated one
        image, meet = (
            panels.compose(_smooth(2, (80, 120)), _smooth(3, (130, 120)), gutter=0),
            (79, 81),
        )
    found = panels.layout(image)
    assert found.panels == 2 and not found.flagged, found
    assert meet[0] <= found.cut <= meet[1], found
    left, right = panels.split(image, require_two=True)
    assert left.width == found.cut and left.width + right.width == image.width


def test_three_panels_and_single_photos_are_flagged_not_cut():
    three = panels.compose(
        panels.compose(_photo(0, (90, 120)), _photo(1, (90, 120)), gutter=6),
        _photo(2, (90, 120)),
        gutter=6,
    )
    found = panels.layout(three)
    assert found.panels == 3 and found.flagged and "1/3" in found.evidence
    photo = _smooth(
        5, (200, 150), slant=0.3
    )  # one picture: smooth, with a slanted object edge near the middle
    found = panels.layout(photo)
    assert found.panels is None and found.flagged, found
    for image in (three, photo):
        with pytest.raises(panels.NotTwoPanels, match="not two panels"):
            panels.split(image, require_two=True)
    assert (
        panels.split(photo)[0].width == 100
    )  # asked to cut anyway: the middle, as the layout promises


def test_completion_grid_marks_the_missing_cell():
    grid = panels.completion_grid(
        _photo(3), _photo(4), _photo(5), _photo(6), missing="but", cell=100, label_height=20
    )
    assert grid.size == (200, 240)
    top_right = np.asarray(grid.crop((110, 30, 190, 110)).convert("L"))
    assert (
        top_right > 200
    ).mean() > 0.7  # mostly white around the question mark: the image is not there
    top_left = np.asarray(grid.crop((10, 30, 90, 110)).convert("L"))
    assert (top_left > 200).mean() < 0.5
    with pytest.raises(ValueError, match="missing"):
        panels.completion_grid(_photo(3), _photo(4), _photo(5), _photo(6), missing="left")


def test_a_uniform_strip_inside_a_picture_is_not_taken_for_the_gutter():
    """A night sky has star-free columns - uniform, like a gutter - nearer the middle of the pair
    than the real gutter; the real one is the white strip that stands out from both its sides."""
    rng = np.random.default_rng(3)
    sky = np.full((120, 200), 12, np.uint8)
    for x in range(200):
        if not 150 <= x < 160:  # a star-free strip at 46-49% of the pair's width
            sky[rng.choice(120, 8, replace=False), x] = 200
    pair = panels.compose(Image.fromarray(np.stack([sky] * 3, -1)), _photo(8, (120, 120)), gutter=8)
    found = panels.layout(pair)
    assert found.panels == 2 and 200 <= found.cut <= 208, found  # the white gutter, at 61-63%
