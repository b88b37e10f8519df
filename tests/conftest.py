"""Shared fixtures. Every test runs offline, with outputs in one temporary folder per session (one
per xdist worker, sharing its built tiny models), never in the repository's outputs/."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

# Set before anything imports transformers; nbval kernels inherit these too.
os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
_OUTPUTS = Path(os.environ.setdefault("VQALAB_OUTPUTS", tempfile.mkdtemp(prefix="vqalab-test-outputs-")))
if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker its own runs (two files may use one run name)...
    _own = _OUTPUTS / os.environ["PYTEST_XDIST_WORKER"]
    (_own / "cache").mkdir(parents=True, exist_ok=True)
    (_OUTPUTS / "models").mkdir(exist_ok=True)
    if not (_own / "cache" / "models").exists():  # ...and the tiny models built once for all (built atomically)
        (_own / "cache" / "models").symlink_to(_OUTPUTS / "models", target_is_directory=True)
    os.environ["VQALAB_OUTPUTS"] = str(_own)
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
    from lib.scrapbook import ScrapbookParams, generate

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


def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (``make test``: ``-n auto``) a test file runs on one worker, so its module
    fixtures (an evaluation, a trained model) are built once, and the notebooks run on one worker in
    their order (each reads the earlier stages' outputs of the smoke run). Written as a scheduler:
    xdist's own ``loadgroup`` marks do not reach the scheduler under pytest 9."""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "notebooks" if path.endswith(".ipynb") else path

    return ByFile(config, log)


FIRST = ("notebooks/", "tests/test_real_profile.py", "tests/test_hf_backend.py")  # the longest runs start first


def pytest_collection_modifyitems(config, items):
    """The longest files first (the notebooks, the real profile's make run, the hf backend): with a
    worker per core the suite then ends with short files on every worker, not one long file on one."""
    rank = lambda item: next((i for i, p in enumerate(FIRST) if item.nodeid.startswith(p)), len(FIRST))  # noqa: E731
    items.sort(key=rank)
