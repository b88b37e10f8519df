"""Run the stage notebooks with papermill under a profile.

    python -m lib.pipeline --profile demo                 # every stage the profile declares, in order
    python -m lib.pipeline --profile demo --stage 04_scrapbook --run my-run
    python -m lib.pipeline --profile real --check         # params only: every stage's config resolved
    python -m lib.pipeline --profile real --preflight     # models, servers and keys reachable?
    python -m lib.pipeline --profile mycluster [--detach] # cluster: in the profile: Slurm jobs

A profile (``params/common.<profile>.yaml``) declares the stages it runs, its models by name, and
whether it is offline; each stage's config is resolved from it by :func:`lib.config.resolve` - the
same function the notebooks and the stage command lines call - so a key the config class does not
have, or a value of the wrong type, stops the run before anything runs, naming the file and key.
The plan is printed first (which stages run with which files, which are skipped and why); then the
preflight (:mod:`lib.pipeline.preflight`) checks every model, server and key the stages need; then each
notebook runs with only ``profile``, ``run`` and its ``overrides`` as parameters. Executed notebooks
go to ``outputs/<run>/executed/``; a failing notebook stops the run and the error names it. A
profile with a ``cluster:`` block submits the stages as Slurm jobs instead (:mod:`lib.pipeline.scheduler.slurm`),
each job running its stage here with ``--local``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lib.config import (
    OFFLINE_ENV,
    ParamsError,
    Profile,
    Resolved,
    did_you_mean,
    load_layer,
    load_profile,
    parse_yaml,
    resolve,
)
from lib.core.paths import NOTEBOOKS, RunBusy, RunLock, check_name, params_root, run_dir
from lib.io import artifacts, write_json
from lib.io.provenance import machine
from lib.models import check_spec
from lib.pipeline import preflight
from lib.pipeline.scheduler import slurm
from lib.pipeline.scheduler.cluster import ClusterConfig, cluster_of
from lib.stages.adversarial_filter import AFConfig
from lib.stages.analyze import AnalyzeConfig
from lib.stages.annotate import AnnotateConfig
from lib.stages.collect import CollectConfig
from lib.stages.evaluate import EvalConfig
from lib.stages.scrapbook import ScrapbookConfig
from lib.stages.setup import SetupConfig
from lib.stages.train import TrainConfig

# Each stage's config dataclass: the single source of its defaults and checks.
STAGE_CONFIGS = {
    c.STAGE: c
    for c in (
        SetupConfig,
        CollectConfig,
        AnnotateConfig,
        AFConfig,
        ScrapbookConfig,
        TrainConfig,
        EvalConfig,
        AnalyzeConfig,
    )
}
# A stage notebook's parameters cell: which profile and run, and overrides - never a stage value.
NOTEBOOK_PARAMETERS = ("profile", "run", "overrides")


class StageFailed(RuntimeError):
    """A notebook raised; ``executed`` is the executed notebook holding the traceback."""

    def __init__(self, stage: str, executed: Path, cause: Exception):
        self.stage, self.executed = stage, executed
        super().__init__(
            f"stage {stage} failed: {cause.__class__.__name__}. Open {executed} to see the failing "
            f"cell and its traceback."
        )


class PreflightFailed(RuntimeError):
    """A model, server or key the profile needs is not there (one line per problem)."""


@dataclass
class StagePlan:
    stage: str
    notebook: Path
    resolved: Resolved

    @property
    def sources(self) -> list[str]:
        return self.resolved.files


@dataclass
class Plan:
    """What a run will do: the stages that run (resolved), those skipped and why."""

    profile: Profile
    run: str
    steps: list[StagePlan]
    skipped: dict[str, str] = field(default_factory=dict)  # stage -> why
    cluster: ClusterConfig | None = None  # the profile's cluster: block (None: run here)

    def describe(self) -> str:
        mode = ("offline" if self.profile.offline else "online") + (
            ", as Slurm jobs" if self.cluster else ""
        )
        lines = [
            f"profile {self.profile.name} ({self.profile.source}, {mode}) -> {run_dir(self.run)}"
        ]
        running = {s.stage: s for s in self.steps}
        for stage in artifacts.STAGES:
            if stage in running:
                lines.append(
                    f"  {stage:<22} runs: {' + '.join(running[stage].sources) or 'class defaults'}"
                )
            elif stage in self.skipped:
                lines.append(f"  {stage:<22} skipped: {self.skipped[stage]}")
        return "\n".join(lines)


def check_notebook(notebook: Path) -> None:
    """A stage notebook exists and its parameters cell declares exactly profile, run and overrides."""
    import papermill

    if not notebook.exists():
        raise ParamsError(f"{notebook}: no such notebook")
    declared = papermill.inspect_notebook(str(notebook))
    if set(declared) != set(NOTEBOOK_PARAMETERS):
        raise ParamsError(
            f"{notebook}: its cell tagged 'parameters' must declare {', '.join(NOTEBOOK_PARAMETERS)} "
            f"and nothing else (stage values live in the config class and params/), "
            f"found {', '.join(declared) or 'none'}"
        )


def plan(
    profile: str,
    stages: list[str] | None = None,
    run: str | None = None,
    overrides: dict[str, dict] | None = None,
    notebooks_dir: Path = NOTEBOOKS,
    params_dir: Path | None = None,
    configs: dict | None = None,
) -> Plan:
    """Resolve and check every stage of the profile before anything runs (``stages``: run only
    these of them; ``overrides``: stage -> fields set on top of the profile)."""
    configs = configs or STAGE_CONFIGS
    if run is not None:  # "" too: a name given is checked, never replaced by the profile's
        check_name(run, "--run: run name", ParamsError)
    prof = load_profile(profile, params_dir)
    for label, spec in prof.models.items():  # the registry, used by a stage or not
        check_spec(spec, f"{prof.source}: models.{label}")
    overrides = overrides or {}
    for stage in list(stages or []) + list(overrides):
        if stage not in prof.stages:
            hint = (
                did_you_mean(stage, prof.stages)
                if stage not in artifacts.STAGES
                else f"; add it to stages in {prof.source}"
            )
            raise ParamsError(
                f"profile {prof.name} does not run {stage!r} (its stages: {', '.join(prof.stages)}){hint}"
            )
    steps, skipped, used = [], {}, set()
    for stage in artifacts.STAGES:
        if stage not in prof.stages:
            skipped[stage] = f"not in the stages of {prof.source.name}"
            continue
        resolved = resolve(configs[stage], prof, run, overrides.get(stage), params_dir)
        if stage != artifacts.SETUP:
            used |= resolved.refs
        if stages and stage not in stages:
            skipped[stage] = "not selected (--stage)"
            continue
        notebook = Path(notebooks_dir) / f"{stage}.ipynb"
        check_notebook(notebook)
        steps.append(StagePlan(stage, notebook, resolved))
    unused = sorted(set(prof.models) - used)
    if unused:
        raise ParamsError(
            f"{prof.source}: model(s) {unused} are used by no stage of the profile: remove them, or name "
            f"them in a stage's params (stage 00 probes every model a profile declares)"
        )
    return Plan(prof, run or prof.run, steps, skipped, cluster_of(prof))


@contextmanager
def _environment(values: dict[str, str]):
    """Set variables for the notebooks' kernels (they inherit them), restoring them afterwards."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(
    profile: str = "demo",
    stages: list[str] | None = None,
    run_name: str | None = None,
    overrides: dict[str, dict] | None = None,
    notebooks_dir: Path = NOTEBOOKS,
    params_dir: Path | None = None,
    progress: bool = True,
    check_models: bool = True,
    configs: dict | None = None,
    local: bool = False,
    detach: bool = False,
) -> Path:
    """Execute the planned stages in order, holding the run folder's lock; returns the run folder.
    A profile with ``cluster:`` submits them as Slurm jobs and waits (``detach``: returns at once)
    unless ``local``. Raises :class:`ParamsError`, :class:`PreflightFailed` (before anything runs),
    :class:`StageFailed`, :class:`lib.pipeline.scheduler.slurm.SlurmError`, or :class:`lib.core.paths.RunBusy`
    when another process holds the run."""
    p = plan(profile, stages, run_name, overrides, notebooks_dir, params_dir, configs)
    print(p.describe(), flush=True)
    env = {
        "VQALAB_PARAMS": str(Path(params_dir or params_root()).resolve()),
        "TOKENIZERS_PARALLELISM": "false",
        **(OFFLINE_ENV if p.profile.offline else {}),
    }
    with _environment(env):
        if check_models:
            problems = preflight.check(p.steps, p.profile.offline)
            if problems:
                raise PreflightFailed(
                    "preflight: "
                    + "\n  ".join([f"{len(problems)} problem(s), nothing has run:", *problems])
                )
        if p.cluster is not None and not local:
            slurm.submit(p, overrides or {}, detach)
            return run_dir(p.run)
        if detach:
            raise ParamsError(
                f"--detach: profile {p.profile.name!r} has no cluster: block to submit to"
            )
        with RunLock(run_dir(p.run)):
            load_before = _loadavg()
            timings = {
                step.stage: _execute(p, step, (overrides or {}).get(step.stage, {}), progress)
                for step in p.steps
            }
            _record_timings(run_dir(p.run) / "timings.json", p.profile.name, timings, load_before)
    return run_dir(p.run)


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _record_timings(
    path: Path,
    profile: str,
    timings: dict[str, tuple[float, dict[str, float]]],
    load_before: list[float],
) -> dict:
    """``timings.json``: seconds per stage and where they went (:func:`stage_parts`), the stages just
    run replacing their earlier entries (``make stage`` after ``make run`` keeps the others), in
    pipeline order; their total; the machine (CPU model, cores, GPUs) and its load averages before
    and after, since a busy machine takes longer for the same work."""
    old = json.loads(path.read_text()) if path.exists() else {}
    seconds, parts = old.get("seconds", {}), old.get("parts", {})
    seconds.update({stage: wall for stage, (wall, _) in timings.items()})
    parts.update({stage: where for stage, (_, where) in timings.items()})
    record = {
        "profile": profile,
        "seconds": {s: seconds[s] for s in artifacts.STAGES if s in seconds},
        "parts": {s: parts[s] for s in artifacts.STAGES if s in parts},
        "total_s": round(sum(seconds[s] for s in artifacts.STAGES if s in seconds), 1),
        "machine": machine(),
        "loadavg": {"before": load_before, "after": _loadavg()},
    }
    write_json(path, record)
    return record


def stage_parts(executed: Path, wall: float) -> dict[str, float]:
    """Where a stage notebook's seconds went: papermill's duration of each code cell, summed under
    the ``##`` heading of the markdown above it (``setup``: the parameters, imports and config
    before the first heading), and ``kernel``: the rest of the wall time (starting and stopping the
    kernel, papermill writing the notebook)."""
    parts, label = {}, "setup"
    for cell in json.loads(executed.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            lines = "".join(cell["source"]).splitlines()
            label = next((h[3:].strip() for h in lines if h.startswith("## ")), label)
        elif cell["cell_type"] == "code":
            took = (cell["metadata"].get("papermill") or {}).get("duration") or 0.0
            parts[label] = parts.get(label, 0.0) + took
    parts = {name: round(took, 1) for name, took in parts.items()}
    return {"kernel": round(max(wall - sum(parts.values()), 0.0), 1), **parts}


def timings_table(record: dict) -> str:
    """``timings.json`` as the table the pipeline prints at its end: per stage its seconds, the
    kernel's and the setup cell's share, and the step that took longest."""
    rows = []
    for stage, wall in record["seconds"].items():
        where = dict(record.get("parts", {}).get(stage, {}))
        kernel, setup = where.pop("kernel", None), where.pop("setup", None)
        step = max(where, key=where.get, default=None)
        rows.append(
            f"{stage:<24}{wall:>9.1f}{_cell(kernel):>9}{_cell(setup):>9}  "
            + (f"{where[step]:.1f} {step}" if step else "")
        )
    m = record["machine"]
    return "\n".join(
        [
            f"{'stage':<24}{'seconds':>9}{'kernel':>9}{'setup':>9}  longest step",
            *rows,
            f"{'total':<24}{record['total_s']:>9.1f}",
            f"on {m['cores']} cores of {m['cpu_model']}{', ' + ', '.join(m['gpu']) if m['gpu'] else ''}; "
            f"load {record['loadavg']['before'][0]} before, {record['loadavg']['after'][0]} after",
        ]
    )


def _cell(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.1f}"


def _execute(
    p: Plan, step: StagePlan, overrides: dict, progress: bool
) -> tuple[float, dict[str, float]]:
    """One stage notebook, executed into ``outputs/<run>/executed/``; its seconds and where they
    went (:func:`stage_parts`)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    out = run_dir(p.run) / "executed" / step.notebook.name
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    print(f"[{step.stage}] running", flush=True)
    try:
        papermill.execute_notebook(
            str(step.notebook),
            str(out),
            kernel_name="python3",
            cwd=str(step.notebook.parent),
            parameters={"profile": p.profile.name, "run": p.run, "overrides": overrides},
            progress_bar=progress,
            log_output=False,
            config=_kernel_config(),
        )
    except PapermillExecutionError as e:
        raise StageFailed(step.stage, out, e) from None
    seconds = round(time.perf_counter() - start, 1)
    print(f"[{step.stage}] done in {seconds:.1f}s -> {out}", flush=True)
    return seconds, stage_parts(out, seconds)


# a Unix socket's path holds at most 107 bytes; an IPC kernel's are its connection file's + "-ipc-N"
IPC_PATH_MAX = 107 - len("/kernel-00000000-0000-0000-0000-000000000000-ipc-5")


def _kernel_config():
    """The notebook kernels' transport: IPC (Unix sockets in Jupyter's runtime folder, readable by
    this user only) where their paths fit, so the kernel talks over no TCP port and warns of none;
    TCP, ipykernel's default (and its warning), where the runtime folder's path is too long."""
    from jupyter_core.paths import jupyter_runtime_dir
    from traitlets.config import Config

    if len(os.fsencode(jupyter_runtime_dir())) > IPC_PATH_MAX:
        return Config()
    return Config({"KernelManager": {"transport": "ipc"}})


def _overrides(assignments: list[str]) -> dict[str, dict]:
    """``--set 05_train.max_steps=50`` -> {"05_train": {"max_steps": 50}} (values are YAML)."""
    out: dict[str, dict] = {}
    for a in assignments:
        key, sep, value = a.partition("=")
        stage, dot, name = key.strip().partition(".")
        if not (sep and dot and name):
            raise ParamsError(f"--set {a!r}: write STAGE.FIELD=VALUE, e.g. 05_train.max_steps=50")
        out.setdefault(stage, {})[name] = parse_yaml(value, f"--set {key.strip()}")
    return out


def _parser() -> argparse.ArgumentParser:
    """The pipeline's command line."""
    ap = argparse.ArgumentParser(
        prog="python -m lib.pipeline", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--profile", default="demo", help="params profile: params/common.<profile>.yaml"
    )
    ap.add_argument(
        "--stage",
        action="append",
        help="run only this stage of the profile (repeatable), e.g. 04_scrapbook",
    )
    ap.add_argument(
        "--run",
        dest="run_name",
        help="run name: outputs go to outputs/<run>/ (default: the profile's)",
    )
    ap.add_argument(
        "--set", action="append", default=[], metavar="STAGE.FIELD=VALUE", help="override one field"
    )
    ap.add_argument(
        "--overrides", metavar="FILE", help="a YAML file of overrides: stage -> {field: value}"
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="only resolve and check every stage's params, run nothing",
    )
    ap.add_argument(
        "--preflight",
        action="store_true",
        help="only check the params and the models, servers and keys",
    )
    ap.add_argument(
        "--local",
        action="store_true",
        help="run the stages here even when the profile has a cluster: block (what each job runs)",
    )
    ap.add_argument(
        "--detach", action="store_true", help="with a cluster: submit the jobs and return at once"
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        overrides = load_layer(args.overrides) if args.overrides else {}
        for stage, values in _overrides(args.set).items():
            overrides.setdefault(stage, {}).update(values)
        if args.check or args.preflight:
            p = plan(args.profile, args.stage, args.run_name, overrides)
            print(p.describe())
            for step in p.steps:
                print(f"{step.stage}: ok ({len(step.resolved.cfg.to_dict())} fields)")
            if args.preflight:
                with _environment(OFFLINE_ENV if p.profile.offline else {}):
                    problems = preflight.check(p.steps, p.profile.offline)
                if problems:
                    raise PreflightFailed("preflight:\n  " + "\n  ".join(problems))
                print(f"preflight: ok ({len(preflight.uses(p.steps))} models checked)")
            return 0
        folder = run(
            args.profile, args.stage, args.run_name, overrides, local=args.local, detach=args.detach
        )
    except (ParamsError, StageFailed, PreflightFailed, RunBusy, slurm.SlurmError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"\nRun outputs: {folder}")
    report = folder / "report.html"
    if report.exists():
        print(f"Report: {report}")
    timings = folder / "timings.json"
    if timings.exists():
        print(f"\n{timings_table(json.loads(timings.read_text()))}")
    print(f"Timings: {timings}")
    print(f"Executed notebooks: {folder / 'executed'}")
    return 0
