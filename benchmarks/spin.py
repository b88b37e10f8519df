"""OpenMP's spin over a whole demo training, alone on the machine (``make bench``).

``lib`` chooses ``GOMP_SPINCOUNT`` as each process starts (``lib/__init__.py``): 1,000 turns at a
barrier before libgomp's threads sleep where other tasks share the cores, libgomp's own 300,000
where the process has them alone. Beside a busy process the short spin is what keeps a two-thread
training from waiting on a descheduled thread (``benchmarks/train.py``'s ``spin.busy_speedup``, over
150 steps); this benchmark asks what either spin costs a training that has the machine alone, where
the choice falls on the long one but load may arrive later: stage 05 exactly as the demo runs it
(``python -m lib.stages.train --profile demo``: every step of its budget, the curriculum, the
checkpoints, the held-out comparison), on the demo's training scenes, with the short spin and with
libgomp's own, ``REPEATS`` runs of each taking turns, on an idle machine. Scheduling only: the
trained weights must be the same bytes under both spins (``same_weights``).

Per spin the record keeps each run's process seconds (start to exit) and the stage's own training
seconds, and their medians; ``idle_ratio`` is the long spin's median training seconds over the
short spin's (above 1: the short spin is faster). The target: the short spin costs at most
``IDLE_COST`` of a training alone, so a training that the choice left on the short spin (the cores
were shared as it started, then freed) loses little.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lib  # noqa: F401 - measured in a subprocess: its spin default (lib/__init__.py)
import lib.training.loop  # noqa: F401 - measured in a subprocess (a change makes the record stale)
from benchmarks.demo_training import _train_set
from benchmarks.records import host_state, record
from lib.core.paths import ROOT
from lib.stages import train  # noqa: F401 - measured in a subprocess

REPEATS = 3
SPINS = {"short": lib.SHORT_SPIN, "long": "300000"}  # lib's short spin; libgomp's own
IDLE_COST = 0.05  # the short spin at most 5% slower than the long one over a whole training alone
TARGETS = {"idle_ratio": f">= {1 - IDLE_COST}", "same_weights": "== true"}


def _train(run: Path, name: str, spin: str, rep: int) -> dict:
    """One demo training with ``GOMP_SPINCOUNT=spin``, set as a user sets it: its seconds and the digest
    of its weights, the best and the last."""
    out = run / f"05_train_{name}_{rep}"
    env = dict(os.environ)
    lib.set_spin(spin, env)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "lib.stages.train", "--profile", "demo", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"training with GOMP_SPINCOUNT={spin} failed:\n{done.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    weights = [
        hashlib.sha256((out / kept / "model.safetensors").read_bytes()).hexdigest()
        for kept in ("best", "last")
    ]
    return {
        "process_seconds": round(seconds, 1),
        "train_seconds": summary["train_seconds"],
        "weights": weights,
    }


def main() -> dict:
    before = host_state()
    runs = {name: [] for name in SPINS}
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        _train_set(run)
        for rep in range(REPEATS):
            for name, spin in SPINS.items():  # taking turns: a drift in the machine hits both
                runs[name].append(_train(run, name, spin, rep))
    result = {"steps": "the demo's (params/05_train.demo.yaml)", "repeats": REPEATS}
    for name, spin in SPINS.items():
        result[name] = {
            "GOMP_SPINCOUNT": int(spin),
            "train_seconds": [r["train_seconds"] for r in runs[name]],
            "process_seconds": [r["process_seconds"] for r in runs[name]],
            "median_train_seconds": statistics.median(r["train_seconds"] for r in runs[name]),
            "median_process_seconds": statistics.median(r["process_seconds"] for r in runs[name]),
        }
    result["idle_ratio"] = round(
        result["long"]["median_train_seconds"] / result["short"]["median_train_seconds"], 3
    )
    result["same_weights"] = len({tuple(r["weights"]) for rs in runs.values() for r in rs}) == 1
    return record("spin", result, before, TARGETS)


if __name__ == "__main__":
    main()
