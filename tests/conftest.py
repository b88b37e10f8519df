"""Shared fixtures. Every test runs offline, with outputs in one temporary folder per session - per
pytest-xdist worker under ``make test`` (so tiny models are built once per worker, never into the
repository's outputs/, and two workers never write the same run)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

# Set before anything imports transformers; nbval kernels inherit these too.
os.environ.update(
    HF_HUB_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    TOKENIZERS_PARALLELISM="false",
)
if worker := os.environ.get(
    "PYTEST_XDIST_WORKER"
):  # its own folder, not the one the controller set
    os.environ["VQALAB_OUTPUTS"] = tempfile.mkdtemp(prefix=f"vqalab-test-outputs-{worker}-")
    # a worker per core: torch's threads (and the subprocesses' and notebook kernels') one each, not
    # one per core in every worker, which doubled the suite's CPU time spinning for cores in use
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # and where a process runs several threads all the same (a stage's own `cpu_threads`), OpenMP's
    # short spin: the workers share the cores by construction, which lib's choice at a process's
    # start (lib/__init__.py) may not see; set here as a user sets it, so every child keeps it
    from lib import SHORT_SPIN, set_spin, users_spin

    if users_spin() is None:
        set_spin(SHORT_SPIN)
os.environ.setdefault("VQALAB_OUTPUTS", tempfile.mkdtemp(prefix="vqalab-test-outputs-"))
os.environ["VQALAB_PROFILE"] = (
    "smoke"  # the notebooks under nbval resolve the smoke profile (params/*.smoke.yaml)
)

from .support.data import check_needed_data  # noqa: E402  (after the environment above)


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures are built from data that is not there
def pytest_runtest_setup(item: pytest.Item) -> None:
    check_needed_data(
        item
    )  # a needs_data test skips without its data, or fails where it is required


_SECONDS: dict[
    str, float
] = {}  # test id -> setup + call + teardown seconds (VQALAB_TEST_DURATIONS)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each test's phases where ``VQALAB_TEST_DURATIONS`` asks for them (the controller
    hears every worker's reports): ``python -m benchmarks.suite`` lists the slow tests from them."""
    if os.environ.get("VQALAB_TEST_DURATIONS") and not os.environ.get("PYTEST_XDIST_WORKER"):
        _SECONDS[report.nodeid] = _SECONDS.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if (path := os.environ.get("VQALAB_TEST_DURATIONS")) and not os.environ.get(
        "PYTEST_XDIST_WORKER"
    ):
        Path(path).write_text(json.dumps(_SECONDS, indent=1))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a ``slow`` test first, then the notebooks, then the rest (each file's tests, and the
    notebooks, in their order): under ``make test`` the longest work units start first, so no worker
    is left running one alone at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(
        key=lambda item: 0 if item.path in slow else 1 if item.path.suffix == ".ipynb" else 2
    )


# Test files that share a costly session fixture, run in one worker so it is built once: file -> unit.
SHARED_UNITS = {
    "tests/scrapbook/test_golden.py": "demo_scrapbook_sets",  # checks the sets' bytes
    "tests/test_learning.py": "demo_scrapbook_sets",
}  # trains on the demo's training set


def pytest_xdist_make_scheduler(config, log):
    """``make test``'s pytest-xdist work units: one per test file (its tests share its module
    fixtures in one worker), or per :data:`SHARED_UNITS` entry, and one for all the notebooks, which
    run in order (each reads the stages before it). Scheduled here, not by ``xdist_group`` marks:
    pytest 9.2 ignores the node id suffix ``--dist loadgroup`` relies on."""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "notebooks" if path.endswith(".ipynb") else SHARED_UNITS.get(path, path)

    return ByFile(config, log)


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
    generate(
        ScrapbookParams(
            canvas=[224, 224],
            size_start=40,
            size_step=10,
            n_sets=2,
            n_backgrounds=1,
            n_arrangements=2,
            n_region_pairs=3,
            n_questions_per_type=1,
            types=["presence", "counting"],
            groups=["np"],
            forms=["original"],
        ),
        out,
        progress=False,
    )
    return out


def scrapbook_sets(profile: str) -> dict:
    """A profile's Scrapbook generator parameters as its stage 04 uses them: its dataset
    ``scrapbook``, then each of its ``sets`` by name."""
    from lib.config import resolve
    from lib.stages.scrapbook import ScrapbookConfig

    cfg = resolve(ScrapbookConfig, profile).cfg
    return {"scrapbook": cfg.params(), **{name: cfg.set_params(name) for name in sorted(cfg.sets)}}


@pytest.fixture(scope="session")
def demo_scrapbook_sets(tmp_path_factory) -> dict[str, Path]:
    """The demo profile's Scrapbook sets as its stage 04 generates them (its dataset ``scrapbook`` and
    each of ``sets``), by name; tests read them, never write. Built once per worker: the files that
    use it form one work unit (:data:`SHARED_UNITS`)."""
    from lib.families.scrapbook import generate

    out = tmp_path_factory.mktemp("demo_scrapbook")
    sets = scrapbook_sets("demo")
    for name, params in sets.items():
        generate(params, out / name, progress=False)
    return {name: out / name for name in sets}


@pytest.fixture(scope="session")
def chromium() -> str:
    """Headless Chromium's path for the page tests (skip without it; fail under VQALAB_BROWSER_REQUIRED=1)."""
    from tests.support.chromium import require_chromium

    return require_chromium()
