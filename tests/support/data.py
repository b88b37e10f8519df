"""The shared real data (``../shared/data``: the MemeQA release, YesBut's images and human
evaluation) that some tests read.

A test that needs it is marked ``@pytest.mark.needs_data("memeqa")`` (a path under the data folder).
Without that path the test skips, unless ``VQALAB_DATA_REQUIRED=1`` (``.ci/run`` sets it), where it
fails instead: a CI run whose data folder moved must not pass by checking nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def check_needed_data(item: pytest.Item) -> None:
    """Skip (or, under ``VQALAB_DATA_REQUIRED=1``, fail) a test whose ``needs_data`` paths are absent."""
    for mark in item.iter_markers("needs_data"):
        path = SHARED_DATA / mark.args[0]
        if path.exists():
            continue
        message = f"{path} is absent (the shared data folder beside the checkout; see its README)"
        if os.environ.get("VQALAB_DATA_REQUIRED") == "1":
            pytest.fail(
                f"{message}; VQALAB_DATA_REQUIRED=1 makes the tests that read it required",
                pytrace=False,
            )
        pytest.skip(message)
