"""Shared fixtures. Every test runs offline, with outputs in one temporary folder per session
(so tiny models are built once per session, never into the repository's outputs/)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

# Set before anything imports transformers; nbval kernels inherit these too.
os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
os.environ.setdefault("VQALAB_OUTPUTS", tempfile.mkdtemp(prefix="vqalab-test-outputs-"))
os.environ["VQALAB_PROFILE"] = "smoke"  # the notebooks under nbval resolve the smoke profile (params/*.smoke.yaml)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def images(tmp_path_factory) -> list[Path]:
    """Four small distinct RGB images on disk."""
    folder = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(4):
        p = folder / f"img{i}.png"
        Image.fromarray(rng.integers(0, 256, (64 + 8 * i, 80, 3), dtype=np.uint8)).save(p)
        paths.append(p)
    return paths


@pytest.fixture(scope="session")
def tiny_llava():
    from lib.models import load_model

    return load_model({"backend": "tiny", "name": "llava", "batch_size": 8}).load()


@pytest.fixture(scope="session")
def training_scenes(tmp_path_factory) -> Path:
    """A small Scrapbook set (presence and counting, original form) that training tests read, never write."""
    from lib.families.scrapbook import ScrapbookParams, generate

    out = tmp_path_factory.mktemp("sb")
    generate(ScrapbookParams(canvas=[224, 224], size_start=40, size_step=10, n_sets=2, n_backgrounds=1,
                             n_arrangements=2, n_region_pairs=3, n_questions_per_type=1, types=["presence", "counting"],
                             groups=["np"], forms=["original"]), out, progress=False)
    return out


@pytest.fixture(scope="session")
def chromium() -> str:
    """Headless Chromium's path for the page tests (skip without it; fail under VQALAB_BROWSER_REQUIRED=1)."""
    from tests.support.chromium import require_chromium

    return require_chromium()

