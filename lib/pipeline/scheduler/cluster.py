"""A profile's ``cluster:`` block: where and with what the pipeline's stages run as scheduler jobs.

    # params/common.<profile>.yaml
    cluster:
      scheduler: slurm
      partition: gpu
      time: "04:00:00"
      cpus_per_task: 8
      stages:
        04_scrapbook: {shards: 8}  # an array of 8 jobs, an eighth of the images each, a merge
        05_train: {nodes: 2, gpus_per_node: 4, time: "12:00:00"}
        06_evaluate: {shards: 4}  # an array of 4 jobs, a quarter of the questions each, a merge

:class:`ClusterConfig` is the single source of the block's defaults. :func:`lib.config.load_profile`
keeps the block as written (a profile extending another takes its block unless it sets its own, or
``cluster: null``); :func:`cluster_of` checks it - unknown keys, wrong types and bad values named
with the file - when the pipeline plans a run, before anything is submitted. A stage's job takes the
block's values with its own ``stages:`` entry on top (:meth:`ClusterConfig.for_stage`);
:mod:`lib.pipeline.scheduler.slurm` turns them into jobs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from lib.config import ParamsError, Profile, dataclass_from
from lib.io import artifacts

# Stages that run as several processes (ranks: lib.core.ranks), one per GPU and node, the only ones a job
# may spread over nodes; the others run as one process (which may use several GPUs: device_map).
MULTI_PROCESS = (artifacts.TRAIN, artifacts.EVALUATE)
# Stages whose work splits into shards run as separate jobs, then merged (``python -m
# lib.stages.<stage> shard`` / ``merge``): a job array and a job after it.
SHARDED = (artifacts.SCRAPBOOK, artifacts.EVALUATE)
# Slurm's --time forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
TIME = re.compile(r"\d+(:\d\d){0,2}|\d+-\d+(:\d\d){0,2}")


@dataclass
class ClusterConfig:
    """Resources and options of the jobs the pipeline submits (``None``: the partition's default)."""

    scheduler: str = "slurm"  # the only scheduler so far; named so a profile says what it targets
    partition: str | None = None  # None: the cluster's default partition
    account: str | None = None  # charged for the jobs; None: your default account
    nodes: int = 1  # more than one (05, 06 only): srun + torchrun --nnodes starts the processes
    gpus_per_node: int = 0  # --gpus-per-node; 05 and 06 run one process per GPU (torchrun)
    cpus_per_task: int | None = None  # a stage uses them for its torch threads and data loading
    mem: str | None = None  # --mem per node, e.g. "64G"
    time: str | None = None  # --time, e.g. "04:00:00"; a job past it is killed (rerun to resume)
    setup: list[str] = field(default_factory=list)  # shell lines before the stage (module load...)
    sbatch: list[str] = field(default_factory=list)  # more options, e.g. ["--qos=high"]
    shards: int = 1  # more than one (04, 06): an array of one-process jobs, then a merge job
    poll_s: float = 10.0  # seconds between looks at the queue while waiting (a shared slurmctld)
    stages: dict[str, dict] = field(default_factory=dict)  # stage -> fields above for its job only

    def for_stage(self, stage: str) -> ClusterConfig:
        """The block as ``stage``'s job gets it: its ``stages:`` entry over the shared values."""
        return replace(self, **self.stages.get(stage, {}), stages={})

    def processes(self, stage: str) -> int:
        """How many processes ``stage``'s job runs (one per GPU and node for a stage that has ranks;
        one in each job of a stage in shards)."""
        if stage not in MULTI_PROCESS or self.shards > 1:
            return 1
        return self.nodes * max(self.gpus_per_node, 1)

    def problems(self, stages: list[str]) -> list[str]:
        """What is wrong with the block's values for a profile running ``stages``."""
        out = [] if self.scheduler == "slurm" else [f"scheduler: {self.scheduler!r} is not slurm"]
        if self.poll_s <= 0:
            out.append(f"poll_s: must be above 0, got {self.poll_s}")
        shared = {"scheduler", "poll_s", "stages"}  # one value for the whole run
        out += _job_problems(self, "")
        for stage, values in self.stages.items():
            if stage not in stages:
                out.append(f"stages.{stage}: the profile does not run it ({', '.join(stages)})")
            out += [
                f"stages.{stage}.{k}: set once for the run, not per stage"
                for k in shared & set(values)
            ]
            if not shared & set(values):
                out += _job_problems(self.for_stage(stage), stage)
        return out


def cluster_of(profile: Profile) -> ClusterConfig | None:
    """The profile's ``cluster:`` block, checked (None: its stages run here); :class:`ParamsError`
    naming the profile's file and the key otherwise."""
    if profile.cluster is None:
        return None
    where = f"{profile.source}: cluster"
    cluster = dataclass_from(ClusterConfig, profile.cluster, where)
    for stage, entry in cluster.stages.items():
        dataclass_from(ClusterConfig, entry, f"{where}.stages.{stage}")
    problems = cluster.problems(profile.stages)
    if problems:
        raise ParamsError(f"{where}: " + "; ".join(problems))
    return cluster


def _job_problems(job: ClusterConfig, stage: str) -> list[str]:
    """One job's settings (``stage``: the stage whose ``stages:`` entry made them, or "")."""
    where, out = f"stages.{stage}." if stage else "", []
    for name, least in (("nodes", 1), ("gpus_per_node", 0), ("cpus_per_task", 1), ("shards", 1)):
        value = getattr(job, name)
        if value is not None and value < least:
            out.append(f"{where}{name}: must be at least {least}, got {value}")
    # a value of the #SBATCH header is one line: a line break would end the header or start a
    # shell line of the job script
    for name in ("partition", "account", "mem", "sbatch"):
        values = getattr(job, name) if name == "sbatch" else [getattr(job, name) or ""]
        out += [f"{where}{name}: {v!r} holds a line break" for v in values if {"\n", "\r"} & set(v)]
    if job.time is not None and not TIME.fullmatch(job.time):
        out.append(f"{where}time: {job.time!r} is not a Slurm time (HH:MM:SS or D-HH:MM:SS)")
    if job.nodes > 1 and stage not in MULTI_PROCESS:
        out.append(
            f"{where}nodes: {stage or 'every stage'} would run on {job.nodes} nodes; only "
            f"{', '.join(MULTI_PROCESS)} run as several processes (set nodes under their stages:)"
        )
    if job.shards > 1 and stage not in SHARDED:
        out.append(
            f"{where}shards: {stage or 'every stage'} would run in {job.shards} shards; only "
            f"{', '.join(SHARDED)} can (set shards under their stages:)"
        )
    if job.shards > 1 and job.nodes > 1:
        out.append(
            f"{where}shards: each of the {job.shards} shards is a job of one process on one "
            f"node, not {job.nodes}: set nodes: 1, or shards: 1 to run the stage on {job.nodes} nodes"
        )
    return out
