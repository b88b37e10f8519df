"""The pipeline on Slurm: each stage one job from a generated sbatch script, chained in order.

    python -m lib.pipeline --profile P             # a profile with a cluster: block submits itself
    python -m lib.pipeline --profile P --detach    # submit and return; the same command later waits

Why generated sbatch scripts and not submitit: a job must run a stage exactly as a local run does -
papermill executing the stage's notebook in a fresh kernel, by ``python -m lib.pipeline --local
--stage S`` - while submitit pickles a Python callable into the job; a plain script is also what a
cluster's users and admins read, resubmit by hand with ``sbatch`` and debug, and needs no package.

Each stage's script is ``outputs/<run>/slurm/<stage>.sbatch`` and its log ``<stage>.<jobid>.log``;
``jobs.json`` lists every submission. The jobs are submitted in the pipeline's order, each after the
one before it succeeded (``--dependency=afterok``; ``--kill-on-invalid-dep`` cancels the rest when
one fails); the first is held until the submission is recorded and the run folder's lock released.
A stage that runs as several processes (05 or 06 given several nodes or GPUs) runs its command line
under ``srun`` + ``torchrun --nnodes`` with a c10d rendezvous on the job's first node.

Stage 04 or 06 given ``shards: k`` (``SHARDED`` in :mod:`lib.pipeline.scheduler.cluster`) is two jobs: an
array (``<stage>.shards.sbatch``, ``--array=0-(k-1)``, a log per task) whose task i runs the stage's
``python -m lib.stages.<name> shard --shard i --num-shards k`` (04: every k-th unit of the main
Scrapbook dataset; 06: every k-th question), then a merge job after it (``<stage>.sbatch``) running
its ``merge``; the next stage waits for the merge. The merge job runs the stage's command, not its
notebook, because the notebook's parameters are only profile, run and overrides, and how the work
was cut is not a config value (as a field it would enter ``config.json``, the manifest and
provenance, and a sharded run would no longer record the config a one-process run records); the
command calls the same step functions the notebook does after the sharded step
(:func:`lib.stages.scrapbook.merge`, :func:`lib.stages.evaluate.merge`), as a multi-process job's
``torchrun`` runs the stage's command too. A failed task stops the waiting command with the end of
that task's log, and the array's other tasks are cancelled with the jobs after it; the rerun asks
only what the call store does not hold (06) or makes the shards again (04, as a rerun of the stage
makes its datasets again).

The submitter prints the job ids and waits, looking at ``scontrol show job`` (accounting may be off,
so not ``sacct``); a job that ends other than COMPLETED stops it with the end of the job's log.
Running the same command again resumes: every stage is submitted again and resumes from what it
stored (the call store, checkpoints), as a local rerun does; while jobs of the previous submission
are still queued or running, the command waits for them instead of submitting twice (and refuses
when it asks other stages, params or ``--set`` values than they run); once they have finished and
written every stage's outputs, it says so and submits nothing. Run and profile names are plain
(:data:`lib.core.paths.NAME`) and every path in a script is quoted, so a name or a folder is data in the
script, never shell code; a ``%`` of a folder is doubled in the log's path. ``sbatch``,
``scontrol`` and ``scancel`` are found on ``PATH``, and ``SLURM_CONF`` is Slurm's own.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from lib.core.paths import ROOT, RunLock, outputs_root, params_root, run_dir
from lib.io import write_json
from lib.pipeline.scheduler.cluster import ClusterConfig

# Job states after which a job will not run again (a requeued or preempted job comes back PENDING).
FAILED = {"FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL"}
FAILED |= {"DEADLINE", "REVOKED", "SPECIAL_EXIT"}
TAIL_LINES = 30  # of a failed job's log, in the error


class SlurmError(RuntimeError):
    """A Slurm command failed, or a job ended other than COMPLETED (the message says which)."""


@dataclass
class Job:
    stage: str
    job_id: str
    script: str
    log: str  # an array's: its tasks' logs, %a standing for the task's number
    array: int = 0  # an array's number of tasks (0: a plain job)

    @property
    def label(self) -> str:
        return f"{self.stage} shards" if self.array else self.stage


# the array job of a stage in shards is named after the stage with this suffix (script, log, name)
SHARDS = ".shards"


def folder(run: str) -> Path:
    """Where a run's job scripts, logs and ``jobs.json`` go."""
    return run_dir(run) / "slurm"


def slurm(*argv: str) -> str:
    """A Slurm command's output; :class:`SlurmError` with its own message when it fails."""
    path = shutil.which(argv[0])
    if path is None:
        raise SlurmError(
            f"{argv[0]} is not on PATH: run on a machine of the Slurm cluster (a login node), or "
            f"drop the cluster: block of the profile to run here"
        )
    done = subprocess.run([path, *argv[1:]], capture_output=True, text=True, timeout=120)
    if done.returncode:
        said = (done.stderr or done.stdout).strip()
        raise SlurmError(f"{' '.join(argv)} failed ({done.returncode}): {said}")
    return done.stdout


def stage_jobs(plan, step) -> list[str]:
    """The names of a stage's jobs, in order: the stage's, or for a stage in shards the array's
    (``<stage>.shards``) then the merge's (the stage's)."""
    shards = plan.cluster.for_stage(step.stage).shards > 1
    return [step.stage + SHARDS, step.stage] if shards else [step.stage]


def job_script(plan, step, overrides: dict, name: str | None = None) -> str:
    """The sbatch script of job ``name`` (one of :func:`stage_jobs`; the stage's by default) of
    ``step`` (a :class:`lib.pipeline.execute.StagePlan` of ``plan``)."""
    job = plan.cluster.for_stage(step.stage)
    name = name or step.stage
    here = folder(plan.run)
    array = name.endswith(SHARDS)
    options = {
        "job-name": f"vqalab-{plan.run}-{name}",
        # '%' is Slurm's in a log's path (%j: the job id), so one of the folder's own is doubled
        "output": f"{str(here).replace('%', '%%')}/{name}.{'%A_%a' if array else '%j'}.log",
        "array": f"0-{job.shards - 1}" if array else None,
        "partition": job.partition,
        "account": job.account,
        "nodes": job.nodes,
        "ntasks-per-node": 1,  # one launcher per node: torchrun starts a node's processes
        "gpus-per-node": job.gpus_per_node or None,
        "cpus-per-task": job.cpus_per_task,
        "mem": job.mem,
        "time": job.time,
    }
    # sbatch reads an #SBATCH line's value as a shell word (quotes, backslashes, '#' a comment)
    header = (f"#SBATCH --{k}={shlex.quote(str(v))}" for k, v in options.items() if v is not None)
    lines = ["#!/bin/bash", *header]
    lines += [f"#SBATCH {option}" for option in job.sbatch]
    lines += [
        "set -euo pipefail",
        f"cd {shlex.quote(str(ROOT))}",
        "# where the submitting command reads params and writes outputs",
        f"export VQALAB_PARAMS={shlex.quote(str(params_root()))}",
        f"export VQALAB_OUTPUTS={shlex.quote(str(outputs_root()))}",
        "export PYTHONUNBUFFERED=1",
        *job.setup,
        *_command(plan, step, job, overrides, array),
        "",
    ]
    return "\n".join(lines)


def _command(plan, step, job: ClusterConfig, overrides: dict, array: bool) -> list[str]:
    """The job's command: the stage's notebook through the pipeline, its ranks under torchrun, or
    for a stage in shards a shard (an array's task) or the merge."""
    python = shlex.quote(sys.executable)
    here = folder(plan.run)
    # names are plain (lib.core.paths.NAME) where they are read; quoted here all the same: data, not code
    common = f"--profile {shlex.quote(plan.profile.name)} --run {shlex.quote(plan.run)}"
    params = shlex.quote(str(here / f"{step.stage}.params.yaml"))
    extra = f" --params {params}" if overrides.get(step.stage) else ""
    module = f"lib.stages.{step.stage.split('_', 1)[1]}"  # 06_evaluate: lib.stages.evaluate
    if job.shards > 1:
        command = f'shard {common} --shard "$SLURM_ARRAY_TASK_ID"' if array else f"merge {common}"
        return [f"exec {python} -m {module} {command} --num-shards {job.shards}{extra}"]
    if job.processes(step.stage) == 1:
        extra = f" --overrides {shlex.quote(str(here / 'overrides.yaml'))}" if overrides else ""
        return [f"exec {python} -m lib.pipeline {common} --stage {step.stage} --local{extra}"]
    # --out, not --run: torchrun would read --run as its own --run-path
    out = shlex.quote(str(run_dir(plan.run) / step.stage))
    return [
        "# the rendezvous: the job's first node, on a port taken from the job id",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "addr=$(scontrol show node \"$head\" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)",
        "port=$((20000 + SLURM_JOB_ID % 20000))",
        f"srun {python} -m torch.distributed.run --nnodes {job.nodes} "
        f"--nproc-per-node {max(job.gpus_per_node, 1)} --rdzv-backend c10d "
        f'--rdzv-endpoint "$addr:$port" --rdzv-id "$SLURM_JOB_ID" -m {module} '
        f"--profile {shlex.quote(plan.profile.name)} --out {out}{extra}",
    ]


def state(job_id: str) -> str | None:
    """A job's state (PENDING, RUNNING, COMPLETED, FAILED...); None once Slurm has forgotten it."""
    try:
        shown = slurm("scontrol", "show", "job", "-o", job_id)
    except SlurmError:
        return None
    m = re.search(r"\bJobState=(\S+)", shown)
    return m.group(1) if m else None


def job_state(job: Job) -> tuple[str | None, str | None]:
    """A job's state and, for an array, the task it is of. An array's (one line a task, or a line
    for tasks not started yet) is its first failed task's; COMPLETED when every task is; RUNNING
    while any task runs; else that of its tasks not done (PENDING)."""
    if not job.array:
        return state(job.job_id), None
    try:
        shown = slurm("scontrol", "show", "job", "-o", job.job_id)
    except SlurmError:
        return None, None
    tasks = [
        (m.group(2), m.group(1))
        for line in shown.splitlines()
        if (m := re.search(r"\bArrayTaskId=(\S+).*?\bJobState=(\S+)", line))
    ]
    failed = [(now, task) for now, task in tasks if now in FAILED]
    if not tasks or failed:
        return failed[0] if failed else (None, None)
    states = [now for now, _ in tasks if now != "COMPLETED"]
    return ("RUNNING" if "RUNNING" in states else states[0]) if states else "COMPLETED", None


def _recorded(run: str) -> list[dict]:
    """``jobs.json``'s submissions as written, oldest first."""
    path = folder(run) / "jobs.json"
    return json.loads(path.read_text())["submissions"] if path.exists() else []


def submissions(run: str) -> list[list[Job]]:
    """Every submission of the run, oldest first (``jobs.json``)."""
    return [[Job(**j) for j in s["jobs"]] for s in _recorded(run)]


def live(run: str) -> list[Job]:
    """The jobs of the run's last submission still queued or running, when none of them failed;
    those left of a chain where one failed or was cancelled are cancelled (a rerun replaces them)."""
    last = (submissions(run) or [[]])[-1]
    states = {j.job_id: job_state(j)[0] for j in last}
    queued = [j for j in last if states[j.job_id] not in FAILED | {"COMPLETED", None}]
    if queued and any(s in FAILED for s in states.values()):
        slurm("scancel", *(j.job_id for j in queued))
        return []
    return queued


def asked(plan) -> str:
    """What a submission was asked to do, as a digest: its stages and each one's resolved config
    (profile, params files and ``--set`` together), so a later command can tell it asks the same."""
    configs = [[s.stage, s.resolved.cfg.to_dict()] for s in plan.steps]
    return hashlib.sha256(json.dumps(configs, sort_keys=True, default=str).encode()).hexdigest()


def finished(plan) -> list[Job] | None:
    """The last submission's jobs when it asked what ``plan`` asks and it is done: none of its jobs
    queued, running or failed (Slurm may have forgotten them), and every stage's outputs written
    since it was submitted (``provenance.json``, a stage's last write). None otherwise."""
    last = (_recorded(plan.run) or [{}])[-1]
    if last.get("asked") != asked(plan):
        return None
    jobs = [Job(**j) for j in last["jobs"]]
    if any(job_state(j)[0] not in ("COMPLETED", None) for j in jobs):
        return None
    for step in plan.steps:
        provenance = run_dir(plan.run) / step.stage / "provenance.json"
        try:
            created = json.loads(provenance.read_text())["created"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(created, str) or created < last["submitted"]:
            return None
    return jobs


def submit(plan, overrides: dict, detach: bool = False) -> list[Job]:
    """Submit the plan's stages as chained jobs and print their ids, then wait for them unless
    ``detach``. While the last submission's jobs are still in the queue, take those when they were
    asked the same (:func:`asked`), else refuse; when they finished and wrote every stage's
    outputs (:func:`finished`), say so and submit nothing."""
    jobs = live(plan.run)
    if not plan.steps:
        return []
    if jobs:
        if (_recorded(plan.run) or [{}])[-1].get("asked") != asked(plan):
            ids = " ".join(j.job_id for j in jobs)
            raise SlurmError(
                f"jobs of the last submission are still queued or running ({_ids(jobs)}) and were "
                f"submitted with other stages, params or --set values than this command's: wait "
                f"for them and run this command again, or cancel them first (scancel {ids})"
            )
        print(f"jobs of the last submission are still queued or running: {_ids(jobs)}", flush=True)
    elif (done := finished(plan)) is not None:
        print(
            f"the jobs of the last submission finished ({_ids(done)}) and every stage's outputs "
            f"are in {run_dir(plan.run)}: nothing submitted (another --set or params submits anew)",
            flush=True,
        )
        return done
    else:
        with RunLock(run_dir(plan.run)):  # no local run writes it meanwhile; jobs take it in turn
            jobs = _submit(plan, overrides)
        slurm("scontrol", "release", jobs[0].job_id)
        print(f"submitted {_ids(jobs)}; scripts and logs in {folder(plan.run)}", flush=True)
    if not detach:
        wait(jobs, plan.cluster.poll_s)
    return jobs


def _submit(plan, overrides: dict) -> list[Job]:
    here = folder(plan.run)
    here.mkdir(parents=True, exist_ok=True)
    if overrides:
        (here / "overrides.yaml").write_text(yaml.safe_dump(overrides, sort_keys=False))
        for stage, values in overrides.items():
            (here / f"{stage}.params.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    jobs: list[Job] = []
    try:
        for step in plan.steps:
            for name in stage_jobs(plan, step):
                script = here / f"{name}.sbatch"
                script.write_text(job_script(plan, step, overrides, name))
                after = [f"--dependency=afterok:{jobs[-1].job_id}"] if jobs else ["--hold"]
                job_id = slurm(
                    "sbatch", "--parsable", "--kill-on-invalid-dep=yes", *after, str(script)
                )
                job_id = job_id.strip().split(";")[0]  # "id;cluster" on a federation
                array = plan.cluster.for_stage(step.stage).shards if name.endswith(SHARDS) else 0
                log = here / f"{name}.{job_id}{'_%a' if array else ''}.log"
                jobs.append(Job(step.stage, job_id, str(script), str(log), array))
    except SlurmError:
        if jobs:
            slurm("scancel", *(j.job_id for j in jobs))
        raise
    done = _recorded(plan.run)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    done.append({"submitted": stamp, "asked": asked(plan), "jobs": [asdict(j) for j in jobs]})
    write_json(here / "jobs.json", {"submissions": done})
    return jobs


def wait(jobs: list[Job], poll_s: float) -> None:
    """Wait for the jobs in order, printing each change of state; :class:`SlurmError` with the end
    of its log for the first that ends other than COMPLETED (the ones after it are cancelled)."""
    try:
        for i, job in enumerate(jobs):
            _wait_one(job, jobs[i + 1 :], poll_s)
    except KeyboardInterrupt:
        raise SlurmError(
            f"stopped waiting; the jobs go on ({_ids(jobs)}): run the same command to wait for "
            f"them again, or scancel {' '.join(j.job_id for j in jobs)} to stop them"
        ) from None


def _wait_one(job: Job, after: list[Job], poll_s: float) -> None:
    seen = None
    while (now := job_state(job))[0] != "COMPLETED":
        state_now, task = now
        if state_now != seen:
            print(f"[{job.label}] job {job.job_id} {state_now}", flush=True)
            seen = state_now
        if state_now is None or state_now in FAILED:
            # an array's other tasks too: its merge will not run, and a rerun submits them again
            rest = [job.job_id] if job.array and state_now is not None else []
            rest += [j.job_id for j in after if job_state(j)[0] not in FAILED | {None}]
            if rest:
                slurm("scancel", *rest)
            raise SlurmError(_failed(job, state_now, task))
        time.sleep(poll_s)
    print(f"[{job.label}] job {job.job_id} COMPLETED; log {job.log}", flush=True)


def _failed(job: Job, now: str | None, task: str | None = None) -> str:
    log = Path(job.log.replace("%a", task) if task else job.log)
    tail = log.read_text(errors="replace").splitlines()[-TAIL_LINES:] if log.exists() else []
    how = f"ended {now}" if now else "is no longer known to Slurm"
    which = f"job {job.job_id}" + (f" (task {task} of its array)" if task else "")
    return "\n".join(
        [
            f"stage {job.stage}: {which} {how}; its script {job.script}, its log {log}"
            + (", which ends:" if tail else " (not written: the job never started)"),
            *(f"  | {line}" for line in tail),
            "Fix the cause, then run the same command again: the stages resume from what they stored.",
        ]
    )


def _ids(jobs: list[Job]) -> str:
    return ", ".join(f"{j.label} {j.job_id}" for j in jobs)
