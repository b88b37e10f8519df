"""Fault injection: stage 06 killed, or its files capped as a full disk would stop them, at seeded
random points of a rerun over a complete evaluation. Afterwards the folder is either complete and
consistent (its metrics equal a rescore of the predictions it holds) or refused with a clear error -
never old numbers shown as new."""

import json
import random
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from lib.io import artifacts
from lib.stages.evaluate import rescore_folder
from lib.stages.setup import demo_datasets

# One evaluation in a child process: the constant baseline on the demo's mcq and vqa sets (no model to
# load, seconds). argv: datasets folder, run folder, answer, file-size cap in bytes (0: none).
CHILD = """
import resource, signal, sys
from pathlib import Path
from lib.stages import evaluate as E
folder, run, answer, cap = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
if cap:  # a write past `cap` bytes in any file fails with EFBIG, as a full disk fails with ENOSPC
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
cfg = E.EvalConfig(datasets={"mcq": f"{folder}/mcq", "vqa": f"{folder}/vqa"}, styles=["zero_shot"],
                   models={"baseline": {"backend": "constant", "answer": answer}}, n_resamples=20)
E.run(cfg, run / "06_evaluate", progress=False)
"""


def _child(folder, run, answer, cap=0):
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(folder), str(run), answer, str(cap)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _consistent_or_refused(run, tmp_path) -> str:
    """'refused' (a clear error), or 'consistent' (metrics equal a rescore of the predictions held)."""
    try:
        shown = artifacts.read_table(run, artifacts.EVALUATE, artifacts.METRICS)
    except (artifacts.StaleTables, ValueError, FileNotFoundError) as e:
        assert "rescore" in str(e) or "rerun" in str(e) or "run stage" in str(e), (
            f"a refusal says what to do: {e}"
        )
        return "refused"
    if shown is None:
        return "refused"
    copy = tmp_path / "check" / run.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run, copy)
    rescore_folder(copy / "06_evaluate")
    again = pd.read_csv(copy / "06_evaluate" / artifacts.METRICS)
    pd.testing.assert_frame_equal(
        shown.reset_index(drop=True), again.reset_index(drop=True), check_dtype=False
    )
    return "consistent"


@pytest.mark.slow
def test_stage_06_killed_or_out_of_space_at_random_points_never_shows_stale_numbers(tmp_path):
    folder = tmp_path / "datasets"
    demo_datasets(folder)
    run = tmp_path / "run"
    start = time.perf_counter()
    first = _child(folder, run, "yes")
    assert first.wait(timeout=300) == 0, first.stderr.read()
    duration = time.perf_counter() - start  # kills are drawn within a run's length
    size = sum(p.stat().st_size for p in (run / "06_evaluate").iterdir() if p.is_file())
    rng = random.Random(0)
    outcomes = []
    for attempt in range(6):
        # each rerun answers differently, so its numbers differ from the complete run's
        answer = f"no{attempt}"
        if attempt % 2 == 0:
            child = _child(folder, run, answer)
            time.sleep(rng.uniform(0.3, 0.95) * duration)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        else:
            child = _child(folder, run, answer, cap=rng.randint(200, max(400, size // 4)))
            child.wait(timeout=300)
        outcomes.append((child.returncode, _consistent_or_refused(run, tmp_path)))
    print("fault outcomes (exit code, state):", outcomes)
    assert {state for _, state in outcomes} <= {"consistent", "refused"}
    assert any(code != 0 for code, _ in outcomes), (
        "no fault struck: the points drawn were after the end"
    )
    final = _child(folder, run, "yes")  # a clean rerun recovers whatever state the faults left
    assert final.wait(timeout=300) == 0, final.stderr.read()
    assert _consistent_or_refused(run, tmp_path) == "consistent"


# A Scrapbook build whose files are capped at argv[3] bytes (as a full disk stops writes).
CAPPED_BUILD = """
import json, resource, signal, sys
from lib.families.scrapbook import ScrapbookParams, generate
cap = int(sys.argv[3])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
generate(ScrapbookParams(**json.loads(sys.argv[2])), sys.argv[1], progress=False)
"""


@pytest.mark.slow
def test_stage_04_out_of_file_space_at_random_points_keeps_the_previous_dataset_whole(tmp_path):
    from lib.families.scrapbook import ScrapbookParams, generate

    from .test_storage import SMALL, _assert_whole, _references, _state

    refs = _references(tmp_path, (1, 2))
    out = tmp_path / "ds"
    generate(ScrapbookParams(**SMALL, seed=1), out, progress=False)
    largest = max(p.stat().st_size for p in out.rglob("*") if p.is_file())
    rng = random.Random(0)
    codes = []
    for _ in range(4):
        previous = _state(out)["seed"]
        params = json.dumps({**SMALL, "seed": 3 - previous})
        r = subprocess.run(
            [sys.executable, "-c", CAPPED_BUILD, str(out), params, str(rng.randint(64, largest))],
            capture_output=True,
            text=True,
            timeout=300,
        )
        codes.append(r.returncode)
        assert _assert_whole(out, refs) in (
            previous,
            3 - previous,
        )  # the old dataset, or the whole new one
    assert any(codes), f"no cap struck: {codes}"
