"""Writing a benchmark's record: ``outputs/bench/<name>.json``, also printed.

Every record says when, on what code and on what machine it was measured - ``date`` (UTC),
``commit`` (the git SHA and whether the tree had uncommitted changes), ``command`` and ``machine``
(``platform``, ``cpu_model``, ``cores``, ``gpu``) - and what else the machine was doing, since a
timing on a shared machine is only as good as its hour: a benchmark takes ``before = host_state()``
as it starts and hands it to ``record``, which adds a ``load`` block (the 1 / 5 / 15 minute load
averages before and after, and ``under_load``; see :func:`under_load`). ``python -m
benchmarks.publish`` copies the records to ``benchmarks/records/``, from which the documentation's
performance page is rendered.
"""

from __future__ import annotations

import datetime
import json
import os
import time

from benchmarks.pages import COMMANDS
from lib.io import write_json
from lib.paths import outputs_root
from lib.provenance import git_state, machine

# others' runnable tasks per core above which a figure counts as measured under load: on 2 cores,
# one busy neighbour (another test run, a notebook) is enough to slow a CPU-bound figure visibly
UNDER_LOAD_PER_CORE = 0.5


def host_state() -> dict:
    """The load averages now, and the CPU seconds this process and its finished children have used."""
    t = os.times()
    return {"loadavg": [round(x, 2) for x in os.getloadavg()], "cpu_s": t.user + t.system + t.children_user + t.children_system,
            "time_s": time.monotonic()}


def stamp(name: str) -> dict:
    """When, on which commit and by which command a record is written."""
    command = COMMANDS.get(name, "make bench")
    return {"benchmark": name, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": git_state(), "command": command}


def under_load(before: dict, after: dict, cores: int) -> tuple[bool, float]:
    """Was the machine busy with other work while a benchmark measured? Returns the verdict and
    the cores the benchmark itself kept busy on average.

    The rule: the 1-minute load average before the measurement, or the one after it less the
    benchmark's own average use of cores (its CPU seconds, its finished child processes' included,
    over the wall-clock seconds), exceeds ``UNDER_LOAD_PER_CORE`` x ``cores``. The load after a
    measurement counts the benchmark's own threads, so without that subtraction every CPU-bound
    benchmark would mark itself. The estimate errs towards "under load": work the benchmark runs
    in processes it has not yet reaped (a server it still holds) counts as others', and a
    benchmark competing for the cores gets fewer CPU seconds than it has threads waiting to run
    (which only happens when others are running)."""
    seconds = max(after["time_s"] - before["time_s"], 1e-9)
    own = max(after["cpu_s"] - before["cpu_s"], 0.0) / seconds
    limit = UNDER_LOAD_PER_CORE * (cores or 1)
    return before["loadavg"][0] > limit or after["loadavg"][0] - own > limit, own


def record(name: str, result: dict, before: dict) -> dict:
    """Write ``result`` with the date, the commit, the machine and its load (``before``:
    :func:`host_state` at the start)."""
    after = host_state()
    info = machine()
    busy, own = under_load(before, after, info["cores"])
    minutes = ("1min", "5min", "15min")
    result = {**stamp(name), **result, "machine": {**result.get("machine", {}), **info}, "load": {
        "before": dict(zip(minutes, before["loadavg"])), "after": dict(zip(minutes, after["loadavg"])),
        "own_cores": round(own, 2), "under_load": busy,
        "rule": f"1-min load before, or after less own_cores, > {UNDER_LOAD_PER_CORE} x cores"}}
    out = outputs_root() / "bench" / f"{name}.json"
    write_json(out, result)
    print(json.dumps(result, indent=2))
    print(f"-> {out}")
    return result
