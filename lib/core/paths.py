"""Where things live: the project root, the outputs root and each stage's folder.

Every path is anchored on this file (cookiecutter-data-science's ``config.py``), so code works the
same from a notebook's folder, the project root or a test's temporary directory. One environment
variable, ``VQALAB_OUTPUTS``, moves all generated files elsewhere (a scratch disk, a test's tmp).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "lib" / "data"  # templates, prompts, corpora shipped with lib
NOTEBOOKS = ROOT / "notebooks"
PARAMS = ROOT / "params"


def params_root() -> Path:
    """Where profiles live; ``$VQALAB_PARAMS`` overrides ``<project>/params`` (a copy to edit, a test's tmp)."""
    return Path(os.environ.get("VQALAB_PARAMS", PARAMS)).resolve()


def outputs_root() -> Path:
    """The root of everything generated; ``$VQALAB_OUTPUTS`` overrides ``<project>/outputs``."""
    return Path(os.environ.get("VQALAB_OUTPUTS", ROOT / "outputs")).resolve()


# A run's or a profile's name: it becomes a folder, a file name, a Slurm job name and a word of the
# job scripts' command lines, so it is data in every one of them only when it holds nothing a shell,
# sbatch or a path reads (no space, quote, '$', ';', '%', '/', newline; no leading '.' or '-').
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
NAME_RULE = "letters, digits and '._-' only, starting with a letter, digit or '_'"


class BadName(ValueError):
    """A run's or a profile's name is not :data:`NAME`."""


def check_name(name, what: str, error: type[ValueError] = BadName) -> str:
    """``name`` when it matches :data:`NAME`; ``error`` naming ``what`` and the value otherwise."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise error(f"{what} {name!r} is not a plain name: use {NAME_RULE}")
    return name


def run_dir(run: str) -> Path:
    """The folder of one pipeline run: ``outputs/<run>/`` (``run``: :data:`NAME`)."""
    return outputs_root() / check_name(run, "run name")


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


def machine_cache(*parts: str) -> Path:
    """A folder under ``$VQALAB_MACHINE_CACHE`` (default ``~/.cache/vqalab``) for what is made once
    per machine from installed packages, whatever the outputs folder (the converted SmolLM2; by
    default beside the services' venvs, ``services/*-venv.sh``)."""
    root = os.environ.get("VQALAB_MACHINE_CACHE") or Path.home() / ".cache" / "vqalab"
    path = Path(root).joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


class RunBusy(RuntimeError):
    """Another process is writing the run folder."""


HELD_ENV = "VQALAB_RUN_LOCKS"  # lock file -> PID of its holder, for the holder's children (notebook kernels)
_HELD: dict[
    str, list
] = {}  # lock file -> [its open file (None when a parent holds it), depth, pid]: this process's


class RunLock:
    """An exclusive lock on a run folder (``<folder>/.lock``, ``fcntl.flock``) for the length of a
    ``with`` block: a second process that would write the same run fails at once, naming the holder.
    The kernel releases the lock when its holder dies, so a killed run leaves no stale lock.

    ``join=True`` (a stage's ``run()``) also goes ahead where the run is already held by this very
    process (``lib.config.cli.main`` around ``run()``) or by the process that started this one (the pipeline
    around its notebooks' kernels): a holder names itself to its children in ``$VQALAB_RUN_LOCKS``,
    and a child joins only while the lock file still names that holder and it still holds it."""

    def __init__(self, folder: str | Path, join: bool = False):
        self.path = Path(folder) / ".lock"
        self.join = join
        self._key = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())
        if (
            key in _HELD and _HELD[key][2] != os.getpid()
        ):  # a copy inherited by a fork: the parent's, not ours
            del _HELD[key]
        if self.join and (key in _HELD or _held_above(self.path, key)):
            _HELD.setdefault(key, [None, 0, os.getpid()])[1] += 1
        else:
            _HELD[key] = [_acquire(self.path), 1, os.getpid()]
            _announce(key, os.getpid())
        self._key = key
        return self

    def __exit__(self, *exc) -> None:
        held = _HELD[self._key]
        held[1] -= 1
        if held[1] == 0:
            del _HELD[self._key]
            if held[0] is not None:
                _announce(self._key, None)
                held[0].close()  # closing releases the lock
        self._key = None


def _acquire(path: Path):
    """The lock file, open and locked by this process; :class:`RunBusy` naming the holder otherwise."""
    import fcntl

    f = open(path, "a+")  # noqa: SIM115 - the lock lasts as long as the file is open
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise RunBusy(
            f"{path.parent} is being written by {holder}: wait for it to finish, or "
            f"write another run (--run NAME)"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"PID {os.getpid()}")
    f.flush()
    return f


def _held_above(path: Path, key: str) -> bool:
    """Whether the process that started this one (``$VQALAB_RUN_LOCKS``) holds ``path`` now: the lock
    is taken and the file names that process."""
    import fcntl

    try:
        pid = json.loads(os.environ.get(HELD_ENV, "{}")).get(key)
    except (ValueError, AttributeError):
        return False
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            return f.read().strip() == f"PID {pid}"
        fcntl.flock(f, fcntl.LOCK_UN)  # nobody holds it: the caller takes it
        return False


def _announce(key: str, pid: int | None) -> None:
    """Name this process to its children as the holder of ``key`` (None: no longer)."""
    try:
        held = json.loads(os.environ.get(HELD_ENV, "{}"))
    except ValueError:
        held = {}
    held = held if isinstance(held, dict) else {}
    if pid is None:
        held.pop(key, None)
    else:
        held[key] = pid
    if held:
        os.environ[HELD_ENV] = json.dumps(held)
    else:
        os.environ.pop(HELD_ENV, None)
