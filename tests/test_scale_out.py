"""Stage 06 over several processes, as researchers launch it: ``torchrun --nproc_per_node 2 -m
lib.stages.evaluate ...`` (on GPUs ``accelerate launch`` starts the same processes; on CPU torchrun gives
them a gloo group). Each rank asks its share of the questions into its own part,
the main rank merges, judges and scores: predictions and metrics equal the single-process run's.
The call cache is emptied before each fresh run, so the ranks really generate. The two-process run is
first killed part-way (rank 1 SIGKILLed after its third stored call, torchrun then stops rank 0), its
main rank started late, so rank 1 must wait for it to claim the folder before writing its part; the
same command resumes it from the shared call cache, making only the calls the killed run had not."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lib.stages.setup import demo_datasets

TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}
TIMING = ("latency_s",)  # a row's wall-clock fields: the only ones that may differ
# stage 06's command, counting the calls each rank stores; rank 1 SIGKILLs itself after KILL_AFTER of them
COUNTED = """import atexit, os, signal, sys, time

rank, kill_after, made = int(os.environ.get("RANK", 0)), int(os.environ.get("KILL_AFTER", 0)), []
if rank == 0:  # the main rank late (a loaded machine): the others must still wait for its claim
    time.sleep(float(os.environ.get("MAIN_LATE", 0)))

from lib.stages import evaluate
from lib.models.store import CallStore

put = CallStore.put


def counted(self, *args, **kwargs):
    put(self, *args, **kwargs)
    made.append(1)
    if rank == 1 and len(made) == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)


CallStore.put = counted
atexit.register(lambda: print(f"rank {rank} made {len(made)} calls", flush=True))
sys.exit(evaluate.main())
"""


def _evaluate(
    params: Path,
    root: Path,
    processes: int,
    fresh: bool = True,
    kill_after: int = 0,
    ok: bool = True,
    main_late: float = 0,
) -> tuple[Path, subprocess.CompletedProcess]:
    """One evaluation into ``root/<processes>``; the outputs root (the tiny model built once, the
    call cache) is shared, its call cache emptied first when ``fresh``."""
    out = root / str(processes) / "06_evaluate"
    for f in (root / "outputs" / "cache").glob("calls.sqlite*") if fresh else ():
        f.unlink()
    (root / "counted.py").write_text(COUNTED)
    env = {
        **os.environ,
        "VQALAB_OUTPUTS": str(root / "outputs"),
        "OMP_NUM_THREADS": "1",
        "KILL_AFTER": str(kill_after),
        "MAIN_LATE": str(main_late),
    }
    script = [str(root / "counted.py"), "--params", str(params), "--out", str(out)]
    if processes == 1:
        cmd = [sys.executable, *script]
    else:
        cmd = [
            str(Path(sys.executable).with_name("torchrun")),
            "--standalone",
            f"--nproc_per_node={processes}",
            *script,
        ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert (done.returncode == 0) == ok, done.stderr[-3000:]
    return out, done


def _made(done: subprocess.CompletedProcess) -> int:
    """The calls the ranks of a run stored (each rank prints its count as it exits)."""
    return sum(int(n) for n in re.findall(r"rank \d made (\d+) calls", done.stdout))


def _stored(root: Path) -> int:
    from lib.models.store import CallStore

    return len(CallStore(root / "outputs" / "cache" / "calls.sqlite"))


def _rows(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


@pytest.mark.slow
def test_two_processes_give_the_single_process_predictions_and_metrics(tmp_path):
    folders = {k: str(v) for k, v in demo_datasets(tmp_path / "data").items()}
    params = tmp_path / "06.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "datasets": folders,
                "models": {"tiny": TINY},
                "styles": ["zero_shot", "cot"],
                "max_new_tokens": 4,
                "cot_max_new_tokens": 6,
                "n_resamples": 50,
                "tasks": {"yesbut.understanding": {"text_metrics": ["bleu", "rouge_l"]}},
            }
        )
    )
    one, _ = _evaluate(params, tmp_path, 1)
    calls = _stored(tmp_path)
    # rank 0 starts 5 s late: rank 1 reaches its part before rank 0 claims the folder, and waits
    _, killed = _evaluate(params, tmp_path, 2, kill_after=3, ok=False, main_late=5)
    assert "SIGKILL" in killed.stderr, killed.stderr[-3000:]  # rank 1's kill, not another failure
    assert not (tmp_path / "2" / "06_evaluate" / "predictions.jsonl").exists()
    left = _stored(tmp_path)  # what the killed run stored before it stopped
    assert 3 <= left < calls
    two, resumed = _evaluate(params, tmp_path, 2, fresh=False)
    assert _made(resumed) == calls - left  # only the calls the killed run had not made
    assert _rows(two) == _rows(one)  # the same answers, read and scored the same, in the same order
    pd.testing.assert_frame_equal(
        pd.read_csv(two / "metrics.csv"), pd.read_csv(one / "metrics.csv")
    )
    assert not list(two.glob("predictions.rank*.jsonl"))  # the parts are merged away
    assert json.loads((two / "summary.json").read_text())["predictions"] == len(_rows(one))


WAITS = """import os, sys, time
from pathlib import Path
from lib.core.ranks import ranks

job, mark = ranks(), Path(sys.argv[1])
job.barrier()  # the first: the process group's setup waits for every rank anyway
if job.main:
    time.sleep(2)
    mark.write_text("main was here")
job.barrier()  # the second must wait too
assert mark.exists(), f"rank {job.rank} left the second barrier before the main rank reached it"
"""


def test_every_barrier_waits_for_every_rank_not_only_the_first(tmp_path):
    """On a CPU accelerate sets up torchrun's gloo group but its wait_for_everyone returns at once;
    only the group's setup (the first barrier) waited, so stage 06's main rank could merge the parts
    before the others had written theirs (CI caught it)."""
    (tmp_path / "waits.py").write_text(WAITS)
    done = subprocess.run(
        [str(Path(sys.executable).with_name("torchrun")), "--standalone", "--nproc_per_node=2"]
        + [str(tmp_path / "waits.py"), str(tmp_path / "mark")],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
