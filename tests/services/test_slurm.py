"""The pipeline on a real Slurm cluster (two slurmd on 127.0.0.1, :mod:`.slurm_cluster`): the smoke
profile submitted as chained jobs ends with the outputs of a local run; a job cancelled with
``scancel`` part-way through its stage is resumed by running the same command again, asking no
model again for what was stored; stage 05 as one job on both nodes (``srun`` + ``torchrun --nnodes
2``) trains as ``torchrun --nproc_per_node 2`` does on one machine; stage 04 in two shards (a job
array, then a merge job that finishes the stage) writes the local run's datasets; stage 06 in two
shards writes the local run's predictions, with a ``--set`` override reaching every job.

The profile is the smoke one plus a ``cluster:`` block, a layer in a temporary params folder;
each run writes under its own temporary outputs root (its own call store too, so the Slurm run
computes everything it compares). Needs root and Debian's slurm-wlm and munge
(``services/slurm.sh``): without them the tests skip, or fail under ``VQALAB_SERVICES_REQUIRED=1``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lib.core.paths import ROOT

from .slurm_cluster import SlurmCluster, missing

PROFILE = "onslurm"
# what the runs are compared on: every dataset's items (as bytes) and 06's predictions and tables
COMPARED = ("*/datasets/*/items.jsonl", "06_evaluate/**/*.jsonl", "06_evaluate/**/*.csv")
# what says how long an answer took or whether it came from the call store, not what it is: left
# out of 06's files before they are hashed
VOLATILE = ("latency", "seconds", "cached")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = missing()
    if why:
        if os.environ.get("VQALAB_SERVICES_REQUIRED") == "1":
            pytest.fail(why)
        pytest.skip(why)
    c = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        start = time.perf_counter()
        c.start()
        print(json.dumps({"slurm_ready_s": round(time.perf_counter() - start, 1)}))
        yield c
    finally:
        c.stop()


# The test profile: smoke with a cluster: block, minus 07 (figures, nothing compared) and with a
# lighter evaluation (fewer items, no judge, one prompt style) to fit the services tests' time.
LAYERS = {
    f"common.{PROFILE}.yaml": {
        "extends": "smoke",
        "run": PROFILE,
        "stages": ["00_setup", "01_collect", "02_annotate", "03_adversarial_filter"]
        + ["04_scrapbook", "05_train", "06_evaluate"],
        "cluster": {"cpus_per_task": 2, "time": "00:20:00", "poll_s": 0.5},
    },
    # stage 05 as one job on both nodes (srun + torchrun --nnodes 2), one thread a process as
    # torchrun --nproc_per_node 2 gives the processes it starts
    "common.twonodes.yaml": {
        "extends": PROFILE,
        "cluster": {
            "cpus_per_task": 2,
            "poll_s": 0.5,
            "setup": ["export OMP_NUM_THREADS=1"],
            "stages": {"05_train": {"nodes": 2}},
        },
    },
    f"06_evaluate.{PROFILE}.yaml": {"max_items": 8, "judge": None, "styles": ["zero_shot"]},
    # stage 06 as an array of two shard jobs and a merge job; max_items 4 here, which the test's
    # --set puts back to the 8 of the local run: the predictions match only if every job took it
    "common.twoshards.yaml": {
        "extends": PROFILE,
        "cluster": {"cpus_per_task": 2, "poll_s": 0.5, "stages": {"06_evaluate": {"shards": 2}}},
    },
    "06_evaluate.twoshards.yaml": {"max_items": 4},
    # stage 04 as an array of two shard jobs (one of the smoke dataset's two units each) and a merge
    "common.scrapshards.yaml": {
        "extends": PROFILE,
        "cluster": {"cpus_per_task": 2, "poll_s": 0.5, "stages": {"04_scrapbook": {"shards": 2}}},
    },
}


@pytest.fixture(scope="module")
def params(tmp_path_factory) -> Path:
    """The smoke profile's files and the test profile's layers over them."""
    folder = tmp_path_factory.mktemp("params") / "my params"  # a space in every job's paths
    folder.mkdir()
    for f in (ROOT / "params").glob("*.smoke.yaml"):
        shutil.copy(f, folder)
    for name, values in LAYERS.items():
        (folder / name).write_text(yaml.safe_dump(values, sort_keys=False))
    return folder


def pipeline(
    params: Path, outputs: Path, cluster: SlurmCluster | None, *args: str, profile: str = PROFILE
):
    """``python -m lib.pipeline --profile onslurm ARGS`` as a user types it, against the cluster."""
    return command(
        params, outputs, cluster, sys.executable, "-m", "lib.pipeline", "--profile", profile, *args
    )


def command(params: Path, outputs: Path, cluster: SlurmCluster | None, *argv):
    """A command of the project with the test profiles, an outputs root and the cluster."""
    env = {
        **os.environ,
        **(cluster.env if cluster else {}),
        "VQALAB_PARAMS": str(params),
        "VQALAB_OUTPUTS": str(outputs),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("VQALAB_PROFILE", None)
    return subprocess.run(
        [str(a) for a in argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def digests(outputs: Path, run: str = PROFILE) -> dict[str, str]:
    """SHA-256 of each compared file of the run, by its path inside the run."""
    folder = outputs / run
    files = sorted({p for pattern in COMPARED for p in folder.glob(pattern)})
    return {
        str(p.relative_to(folder)): hashlib.sha256(_content(p, folder)).hexdigest() for p in files
    }


def _content(path: Path, run: Path) -> bytes:
    """A file with the run folder's own path (01's items name their images by it) as ``<run>``;
    06's files also without what varies from one run to the next."""
    text = path.read_text().replace(str(run), "<run>")
    if "06_evaluate" not in path.parts:
        return text.encode()
    if path.suffix == ".csv":
        table = pd.read_csv(io.StringIO(text))
        table = table[[c for c in table.columns if not any(v in c for v in VOLATILE)]]
        return table.to_csv(index=False).encode()
    rows = [_without(json.loads(line)) for line in text.splitlines()]
    return "\n".join(json.dumps(r, sort_keys=True) for r in rows).encode()


def _without(value):
    if isinstance(value, dict):
        return {k: _without(v) for k, v in value.items() if not any(w in k for w in VOLATILE)}
    return [_without(v) for v in value] if isinstance(value, list) else value


def calls(outputs: Path) -> dict[str, float]:
    """The run's call store: key -> when the call was stored (:class:`lib.models.store.CallStore`); empty
    before the first call."""
    path = outputs / "cache" / "calls.sqlite"
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return dict(db.execute("SELECT key, created FROM calls"))
    except sqlite3.OperationalError:  # not made yet
        return {}


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, (
        f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout


@pytest.fixture(scope="module")
def local(params, tmp_path_factory) -> Path:
    """The reference: the same profile run here (``--local``); its outputs root."""
    outputs = tmp_path_factory.mktemp("local")
    ok(pipeline(params, outputs, None, "--local"))
    print(json.dumps({"local_digests": digests(outputs)}, indent=1))
    return outputs


def outputs_beside(local: Path, folder: Path, *runs: str, without: tuple[str, ...] = ()) -> Path:
    """A fresh outputs root holding the tiny models the local run's stage 00 built (hard links: the
    same bytes, built once) and, as ``runs``, copies of the local run less the stages ``without``;
    its call store is its own, so every answer compared is asked again."""
    shutil.copytree(local / "cache" / "models", folder / "cache" / "models", copy_function=os.link)
    skip = shutil.ignore_patterns(*without, "executed", "slurm", ".lock", "timings.json")
    for run in runs:
        shutil.copytree(local / PROFILE, folder / run, ignore=skip)
    return folder


def test_the_smoke_profile_through_slurm_equals_the_local_run(cluster, params, local, tmp_path):
    """In a params folder and an outputs root whose paths hold a space (and the outputs' a ``%``,
    which sbatch would read as a pattern in a log's path); the same command once the jobs have
    finished submits nothing."""
    outputs = outputs_beside(local, tmp_path / "slurm outputs 100%")
    out = ok(pipeline(params, outputs, cluster))
    jobs = json.loads((outputs / PROFILE / "slurm" / "jobs.json").read_text())["submissions"]
    stages = [j["stage"] for j in jobs[0]["jobs"]]
    assert len(jobs) == 1 and stages == LAYERS[f"common.{PROFILE}.yaml"]["stages"], stages
    for job in jobs[0]["jobs"]:
        assert f"{job['stage']} {job['job_id']}" in out and f"job {job['job_id']} COMPLETED" in out
        script = Path(job["script"]).read_text()
        assert f"--stage {job['stage']} --local" in script and "#SBATCH --cpus-per-task=2" in script
        assert f"[{job['stage']}] done in" in Path(job["log"]).read_text()  # papermill in the job
    expected = digests(local)
    print(json.dumps({"slurm_digests": digests(outputs)}, indent=1))
    assert digests(outputs) == expected and len(expected) >= 7, sorted(expected)
    again = ok(pipeline(params, outputs, cluster))
    assert "nothing submitted" in again, again
    assert (
        len(json.loads((outputs / PROFILE / "slurm" / "jobs.json").read_text())["submissions"]) == 1
    )


def test_a_job_cancelled_mid_stage_is_resumed_by_the_same_command(cluster, params, local, tmp_path):
    """06's job cancelled once it has stored answers of its own, then the same command again: it
    finishes with the local run's outputs and asks no model again for what was stored (04 to 06
    run; 00 to 03 are the local run's)."""
    outputs = outputs_beside(
        local, tmp_path, PROFILE, without=("04_scrapbook", "05_train", "06_evaluate")
    )
    again = ["--stage", "04_scrapbook", "--stage", "05_train", "--stage", "06_evaluate"]
    ok(pipeline(params, outputs, cluster, *again, "--detach"))  # returns at once
    record = outputs / PROFILE / "slurm" / "jobs.json"
    first = json.loads(record.read_text())["submissions"][0]["jobs"]
    victim = next(j["job_id"] for j in first if j["stage"] == "06_evaluate")
    _when_running(cluster, victim)
    before = len(calls(outputs))
    while len(calls(outputs)) <= before:  # cancelled once it has stored a call of its own
        time.sleep(0.1)
    cluster.run("scancel", victim)
    while "JobState=CANCELLED" not in cluster.run("scontrol", "show", "job", victim).stdout:
        time.sleep(0.2)
    assert not (outputs / PROFILE / "06_evaluate" / "summary.json").exists(), "06 had finished"
    stored = calls(outputs)
    out = ok(pipeline(params, outputs, cluster, *again))  # the same command, waiting this time
    assert len(json.loads(record.read_text())["submissions"]) == 2, out
    ran = {k: v for k, v in digests(local).items() if k.startswith(("04_", "06_"))}
    assert {k: digests(outputs)[k] for k in ran} == ran and len(ran) >= 5, sorted(ran)
    after = calls(outputs)  # a call asked again would be stored again, at a new time
    assert {k: after[k] for k in stored} == stored, (
        "calls stored before the cancel were asked again"
    )
    assert len(after) > len(stored)


def _when_running(cluster: SlurmCluster, job_id: str) -> None:
    deadline = time.monotonic() + 600
    while "JobState=RUNNING" not in cluster.run("scontrol", "show", "job", job_id).stdout:
        assert time.monotonic() < deadline, f"job {job_id} never started"
        time.sleep(0.2)


def test_stage_05_on_two_nodes_trains_as_two_processes_on_one_machine(
    cluster, params, local, tmp_path
):
    """05 as one job on n1 and n2 (``srun`` + ``torchrun --nnodes 2``, c10d on the first node)
    against ``torchrun --standalone --nproc_per_node 2`` here, both from the local run's 00-04."""
    outputs = outputs_beside(
        local, tmp_path, "twonodes", "here", without=("05_train", "06_evaluate")
    )
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    here = ["--standalone", "--nproc_per_node", "2", "-m", "lib.stages.train", "--profile"]
    ok(
        command(
            params,
            outputs,
            None,
            torchrun,
            *here,
            "twonodes",
            "--out",
            outputs / "here" / "05_train",
        )
    )
    out = ok(
        pipeline(
            params, outputs, cluster, "--stage", "05_train", "--run", "twonodes", profile="twonodes"
        )
    )
    job = json.loads((outputs / "twonodes" / "slurm" / "jobs.json").read_text())["submissions"][0]
    shown = cluster.run("scontrol", "show", "job", job["jobs"][0]["job_id"]).stdout
    assert "NumNodes=2" in shown and "srun" in Path(job["jobs"][0]["script"]).read_text(), out
    two_nodes, one_machine = (
        pd.read_csv(outputs / r / "05_train" / "curve.csv") for r in ("twonodes", "here")
    )
    assert two_nodes.drop(columns="train_seconds").equals(one_machine.drop(columns="train_seconds"))
    for run in ("twonodes", "here"):
        summary = json.loads((outputs / run / "05_train" / "summary.json").read_text())
        assert summary["training"]["processes"] == 2


def test_stage_06_in_two_shards_merges_to_the_one_process_predictions(
    cluster, params, local, tmp_path
):
    """06 as an array of two shard jobs, then a merge job after it, from the local run's 00-05:
    its predictions and tables are the local (one-process) run's, and a ``--set`` on the command
    line reaches the shards and the merge (the profile's max_items differs from the local run's)."""
    outputs = outputs_beside(local, tmp_path, "twoshards", without=("06_evaluate",))
    again = ["--stage", "06_evaluate", "--run", "twoshards", "--set", "06_evaluate.max_items=8"]
    out = ok(pipeline(params, outputs, cluster, *again, profile="twoshards"))
    record = outputs / "twoshards" / "slurm" / "jobs.json"
    jobs = json.loads(record.read_text())["submissions"][0]["jobs"]
    assert [(j["stage"], j["array"]) for j in jobs] == [("06_evaluate", 2), ("06_evaluate", 0)]
    array, merge = jobs
    assert (
        f"06_evaluate shards {array['job_id']}" in out and f"06_evaluate {merge['job_id']}" in out
    )
    for task in (0, 1):  # each task asked its own share (its part's record, printed to its log)
        log = Path(array["log"].replace("%a", str(task))).read_text()
        assert f'"shard": {task}' in log and '"num_shards": 2' in log, log[-2000:]
    assert "--params" in Path(array["script"]).read_text() + Path(merge["script"]).read_text()
    ran = {k: v for k, v in digests(outputs, "twoshards").items() if k.startswith("06_")}
    print(json.dumps({"twoshards_digests": ran}, indent=1))
    expected = {k: v for k, v in digests(local).items() if k.startswith("06_")}
    assert ran == expected and len(expected) >= 3, sorted(ran)


def test_stage_04_in_two_shards_merges_to_the_one_process_datasets(
    cluster, params, local, tmp_path
):
    """04 as an array of two shard jobs (each half the main dataset's units), then a merge job that
    finishes the stage, from the local run's 00-03: the datasets' items, images and masks are the
    local (one-process) run's bytes, and the shards are merged away."""
    outputs = outputs_beside(
        local, tmp_path, "scrapshards", without=("04_scrapbook", "05_train", "06_evaluate")
    )
    again = ["--stage", "04_scrapbook", "--run", "scrapshards"]
    out = ok(pipeline(params, outputs, cluster, *again, profile="scrapshards"))
    record = outputs / "scrapshards" / "slurm" / "jobs.json"
    jobs = json.loads(record.read_text())["submissions"][0]["jobs"]
    assert [(j["stage"], j["array"]) for j in jobs] == [("04_scrapbook", 2), ("04_scrapbook", 0)]
    for task in (0, 1):  # each task made its own shard (its statistics, printed to its log)
        log = Path(jobs[0]["log"].replace("%a", str(task))).read_text()
        assert '"images": 3' in log, log[-2000:]  # the smoke dataset: 6 images, 2 units
    stage = outputs / "scrapshards" / "04_scrapbook"
    assert (stage / "provenance.json").exists() and not (stage / "shards").exists(), out
    ran = {k: v for k, v in digests(outputs, "scrapshards").items() if k.startswith("04_")}
    print(json.dumps({"scrapshards_digests": ran}, indent=1))
    expected = {k: v for k, v in digests(local).items() if k.startswith("04_")}
    assert ran == expected and expected, sorted(ran)
    assert _pictures(stage) == _pictures(local / PROFILE / "04_scrapbook")


def _pictures(stage: Path) -> dict[str, str]:
    """SHA-256 of every image and mask of a stage's datasets, by its path in the stage folder."""
    return {
        str(p.relative_to(stage)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(stage.glob("datasets/*/*/*.png"))
    }
