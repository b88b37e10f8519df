"""Where things live: the project root, the outputs root and each stage's folder.

Every path is anchored on this file (cookiecutter-data-science's ``config.py``), so code works the
same from a notebook's folder, the project root or a test's temporary directory. One environment
variable, ``VQALAB_OUTPUTS``, moves all generated files elsewhere (a scratch disk, a test's tmp).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"  # templates, prompts, corpora shipped with lib
NOTEBOOKS = ROOT / "notebooks"
PARAMS = ROOT / "params"


def params_root() -> Path:
    """Where profiles live; ``$VQALAB_PARAMS`` overrides ``<project>/params`` (a copy to edit, a test's tmp)."""
    return Path(os.environ.get("VQALAB_PARAMS", PARAMS)).resolve()


def outputs_root() -> Path:
    """The root of everything generated; ``$VQALAB_OUTPUTS`` overrides ``<project>/outputs``."""
    return Path(os.environ.get("VQALAB_OUTPUTS", ROOT / "outputs")).resolve()


def run_dir(run: str) -> Path:
    """The folder of one pipeline run: ``outputs/<run>/``."""
    if not run or "/" in run or run.startswith("."):
        raise ValueError(f"run name {run!r} must be a plain folder name (no '/', not hidden)")
    return outputs_root() / run


def stage_dir(run: str, stage: str, create: bool = True) -> Path:
    """The folder a stage writes: ``outputs/<run>/<stage>/`` (created unless ``create=False``)."""
    path = run_dir(run) / stage
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir(*parts: str) -> Path:
    """A folder under ``outputs/cache/`` shared by all runs (built models, the call store)."""
    path = outputs_root().joinpath("cache", *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


class RunBusy(RuntimeError):
    """Another process is writing the run folder."""


class RunLock:
    """An exclusive lock on a run folder (``<folder>/.lock``, ``fcntl.flock``) for the length of a
    ``with`` block: a second process that would write the same run fails at once, naming the holder.
    The kernel releases the lock when its holder dies, so a killed run leaves no stale lock."""

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / ".lock"
        self._file = None

    def __enter__(self) -> "RunLock":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            raise RunBusy(f"{self.path.parent} is being written by {holder}: wait for it to finish, or "
                               f"write another run (--run NAME)") from None
        f.seek(0)
        f.truncate()
        f.write(f"PID {os.getpid()}")
        f.flush()
        self._file = f
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()  # closing releases the lock
        self._file = None
