"""CI's time (``python -m benchmarks.ci``, not part of ``make bench``: it is the whole CI): writes
outputs/bench/ci.json.

``.ci/run`` as CI runs it, on a fresh clone of this commit beside the checkout (so the suite finds
``../shared/data`` as it does here): system packages, a new virtual environment, ``make test``,
``make docs`` and ``make test-services``. The figures are the wall-clock seconds of the whole run
and of ``make test``'s pytest (its own summary line), with the tests it passed, skipped and failed.
Its targets (``TARGETS``): ``make test`` within 10 minutes and all of CI within an hour on this
machine's cores, exit code 0, and nothing failed, errored or skipped. The record names the clone's
commit (the checkout may move on meanwhile). The clone is removed afterwards, its log kept in
outputs/bench/.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

from benchmarks.records import host_state, record
from lib.core.paths import ROOT, outputs_root
from lib.io.provenance import git_state

# success, not only speed: the run exited 0, and neither make test nor the services failed, errored (a
# fixture whose service or browser is missing errors) or skipped (a check that did not run proves nothing)
TARGETS = {
    "make_test_seconds": "<= 600",
    "ci_seconds": "<= 3600",
    "exit_code": "== 0",
    **{
        f"{part}.{count}": "== 0"
        for part in ("make_test", "services")
        for count in ("failed", "errors", "skipped")
    },
}
# pytest's last line: "=== 950 passed, 23 skipped, 45 warnings in 586.12s (0:09:46) ==="
SUMMARY = re.compile(r"^=+ (?P<counts>.*?) in (?P<seconds>[\d.]+)s(?: \([\d:]+\))? =+$", re.M)


def pytest_runs(log: str) -> list[dict]:
    """Each pytest summary line of a log, in order: its counts (passed, skipped, failed, errors) and seconds."""
    out = []
    for m in SUMMARY.finditer(log):
        # pytest writes "1 error" but "2 errors" (and "1 warning" / "2 warnings")
        counts = {
            "errors" if word == "error" else word: int(n)
            for n, word in re.findall(r"(\d+) (\w+)", m["counts"])
        }
        out.append(
            {k: counts.get(k, 0) for k in ("passed", "skipped", "failed", "errors")}
            | {"seconds": float(m["seconds"])}
        )
    return out


def main() -> dict:
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    clone = ROOT.parent / f"vqalab-ci-{sha[:8]}"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    # the commit CI ran is the clone's: the checkout may move on during the run
    commit = git_state(clone)
    log = outputs_root() / "bench" / "ci.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    before = host_state()
    start = time.monotonic()
    try:
        with log.open("w") as f:
            rc = subprocess.run(
                ["bash", ".ci/run"], cwd=clone, stdout=f, stderr=subprocess.STDOUT
            ).returncode
        seconds = time.monotonic() - start
    finally:
        shutil.rmtree(clone, ignore_errors=True)
    runs = pytest_runs(log.read_text())
    if len(runs) != 2:
        raise RuntimeError(
            f"{log}: expected the summaries of make test and make test-services, found {len(runs)} "
            f"(exit {rc})"
        )
    result = {
        "commit": commit,
        "clone": f"{clone.name} (git clone of HEAD beside the checkout)",
        "exit_code": rc,
        "ci_seconds": round(seconds, 1),
        "make_test_seconds": runs[0]["seconds"],
        "make_test": runs[0],
        "services": runs[1],
        "log": str(log),
    }
    return record("ci", result, before, TARGETS)


if __name__ == "__main__":
    main()
