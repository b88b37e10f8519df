"""Run every benchmark module (``make bench``); each writes ``outputs/bench/<name>.json``, which
``python -m benchmarks.publish`` (run next by ``make bench``) copies to ``benchmarks/records/``.

``python -m benchmarks.run --stale`` runs only those whose published record is stale (the code it
measures changed since its commit: :func:`benchmarks.records.stale`) or missing.

Before each benchmark it waits for the machine to settle (:func:`settle`): a CPU-bound benchmark
leaves the 1-minute load average above the under-load line for a minute after it ends, so the
next one, started at once, would be marked as measured under load (and the publisher would not let
it replace an idle record) because of the benchmark before it."""

import importlib
import json
import os
import pkgutil
import sys
import time
from pathlib import Path

from benchmarks.records import RECORDS, UNDER_LOAD_PER_CORE, TargetError, stale

HERE = Path(__file__).parent
SETTLE_BELOW = 0.6  # of the under-load line: the 1-minute load a benchmark waits for
SETTLE_AT_MOST_S = 240  # then it starts anyway (its record says whether it ran under load)


def settle() -> None:
    """Wait until the 1-minute load is below :data:`SETTLE_BELOW` of the under-load line, at most
    :data:`SETTLE_AT_MOST_S` seconds."""
    limit = SETTLE_BELOW * UNDER_LOAD_PER_CORE * (os.cpu_count() or 1)
    deadline = time.monotonic() + SETTLE_AT_MOST_S
    while os.getloadavg()[0] > limit and time.monotonic() < deadline:
        time.sleep(5)


def is_stale(name: str) -> bool:
    """Has the code benchmark ``name`` measures changed since its published record (or is there
    none, or can nobody tell)?"""
    path = RECORDS / f"{name}.json"
    if not path.exists():
        return True
    try:
        return bool(stale(json.loads(path.read_text()), HERE / f"{name}.py"))
    except TargetError:
        return True


if __name__ == "__main__":
    # gpu_check is `make gpu-check`, for a machine with a CUDA GPU; ci is the whole CI (python -m
    # benchmarks.ci); publish and pages measure nothing
    skip = ("run", "gpu_check", "ci", "publish", "pages")
    names = sorted(
        m.name
        for m in pkgutil.iter_modules([str(HERE)])
        if not m.name.startswith("_") and m.name not in skip
    )
    if "--stale" in sys.argv[1:]:
        names = [name for name in names if is_stale(name)]
        print(f"stale or missing: {names or 'none'}", flush=True)
    failed = []
    for name in names:
        settle()
        print(f"== benchmarks.{name} (1-min load {os.getloadavg()[0]:.2f})", flush=True)
        result = importlib.import_module(f"benchmarks.{name}").main()
        if not result.get("meets_targets", True):
            failed.append(name)
    if failed:
        print(f"targets missed: {failed}", file=sys.stderr)
        sys.exit(1)
