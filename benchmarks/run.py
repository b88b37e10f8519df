"""Run every benchmark module (``make bench``); each writes ``outputs/bench/<name>.json``, which
``python -m benchmarks.publish`` (run next by ``make bench``) copies to ``benchmarks/records/``."""

import importlib
import pkgutil
import sys
from pathlib import Path

if __name__ == "__main__":
    # gpu_check is `make gpu-check`, for a machine with a CUDA GPU; ci is the whole CI (python -m
    # benchmarks.ci); publish and pages measure nothing
    skip = ("run", "gpu_check", "ci", "publish", "pages")
    names = sorted(
        m.name
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if not m.name.startswith("_") and m.name not in skip
    )
    failed = []
    for name in names:
        print(f"== benchmarks.{name}", flush=True)
        result = importlib.import_module(f"benchmarks.{name}").main()
        if not result.get("meets_targets", True):
            failed.append(name)
    if failed:
        print(f"targets missed: {failed}", file=sys.stderr)
        sys.exit(1)
