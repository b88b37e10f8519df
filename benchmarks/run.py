"""Run every benchmark module (``make bench``); each writes ``outputs/bench/<name>.json``, which
``python -m benchmarks.publish`` (run next by ``make bench``) copies to ``benchmarks/records/``.

``python -m benchmarks.run --stale`` runs only those whose published record is stale (the code it
measures changed since its commit: :func:`lib.records.stale`) or missing."""

import importlib
import json
import pkgutil
import sys
from pathlib import Path

from lib.records import RECORDS, TargetError, stale

HERE = Path(__file__).parent


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
        print(f"== benchmarks.{name}", flush=True)
        result = importlib.import_module(f"benchmarks.{name}").main()
        if not result.get("meets_targets", True):
            failed.append(name)
    if failed:
        print(f"targets missed: {failed}", file=sys.stderr)
        sys.exit(1)
