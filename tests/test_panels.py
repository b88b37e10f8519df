"""Two-panel tools: the gutter is found where there is one, the middle otherwise; the 2x2 grid."""

import numpy as np
import pytest
from PIL import Image

from lib import panels


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


def test_split_without_a_gutter_cuts_in_the_middle():
    noise = _photo(2, (200, 100))
    assert panels.find_gutter(noise) == 100


def test_completion_grid_marks_the_missing_cell():
    grid = panels.completion_grid(_photo(3), _photo(4), _photo(5), _photo(6), missing="but", cell=100, label_height=20)
    assert grid.size == (200, 240)
    top_right = np.asarray(grid.crop((110, 30, 190, 110)).convert("L"))
    assert (top_right > 200).mean() > 0.7  # mostly white around the question mark: the image is not there
    top_left = np.asarray(grid.crop((10, 30, 90, 110)).convert("L"))
    assert (top_left > 200).mean() < 0.5
    with pytest.raises(ValueError, match="missing"):
        panels.completion_grid(_photo(3), _photo(4), _photo(5), _photo(6), missing="left")
