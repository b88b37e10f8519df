"""Stage 06 · Evaluate: ask models the tasks' questions, read the answers honestly, score them.

    run(EvalConfig(datasets=..., models=...), out)       # every step in order
    python -m lib.stages.evaluate --profile demo          # -> outputs/demo/06_evaluate
    python -m lib.stages.evaluate rescore --run RUN   # recompute every table from stored outputs, no model

For cluster runs (a Slurm array, :mod:`lib.pipeline.scheduler.slurm`), the questions in shards, each a job of
its own, then merged (the config of each resolved as the stage resolves it: ``--profile``,
``--params``, ``--set``, ``--run``):

    python -m lib.stages.evaluate shard --profile P --shard i --num-shards k   # i = 0 .. k-1
    python -m lib.stages.evaluate merge --profile P --num-shards k   # then run()'s other steps

Notebook 06 calls the steps :func:`run` composes, one per section: :func:`items_to_ask`,
:func:`~lib.eval.ask.ask`, :func:`~lib.eval.rescore.rescore_folder`, then :func:`finish` (summary
and provenance). The work is the evaluation engine's (:mod:`lib.eval`): which items, asking (one
process or many, resumed through the call cache), reading, streaming scoring and rescoring,
manifests and tables. This module binds it to a run: ``stage:`` paths (the run the config was
resolved for, :func:`run_of`, wherever ``--out`` writes; a model or demo dataset not there is an
``error:`` before anything starts), the demo's datasets, the summary, the command line.

Answers are read as their task (:mod:`lib.families`) defines: constrained decoding over the closed answer set where
the task has one (and ``constrain`` is on), robust parsing otherwise. What cannot be read stays in
``raw`` with ``valid=False`` and counts as wrong in every denominator; ``n_invalid`` sits beside
every metric. Prompt styles are :mod:`lib.tasks.styles` objects: zero-shot, and zero-shot chain of
thought (``cot``) in two calls as Kojima et al. ask it (the reasoning is kept in
``meta.reasoning``). Each task's settings (token limit, LAVE, its own options) are its block under
``tasks:``.

Outputs under ``outputs/<run>/06_evaluate/``: ``predictions.jsonl``, ``judgements.jsonl`` (LAVE),
``metrics.csv`` (model, dataset, task, style, subset, metric, value, ci_low, ci_high, n, n_clusters,
n_invalid: the interval resamples the n_clusters clusters - images, Scrapbook's image chains - not the n answers),
``levels.csv`` and ``errors.csv`` (Scrapbook, shaped like the paper's Tables 8-15), ``config.json``
(the resolved config rescoring reads), ``summary.json``, ``provenance.json``. The tables are written
atomically, then ``metrics.meta.json`` records the predictions and manifest they came from: a
rerun or rescore stopped before that (a kill, a full disk) leaves tables every reader refuses
(:func:`lib.io.artifacts.stale_tables`) rather than old numbers beside new predictions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lib import config
from lib.config import cli
from lib.core.paths import RunLock, run_dir, stage_dir
from lib.core.ranks import Ranks, ranks
from lib.eval.ask import (
    LET_GO,
    PartRefused,
    ask,
    ask_merged,
    ask_shard,
    held_parts,
    remove_parts,
    shard_folder,
)
from lib.eval.items import load_eval_items
from lib.eval.rescore import rescore_folder
from lib.eval.score import invalid_summary
from lib.eval.settings import EvalConfig
from lib.io import ItemsAt, artifacts, release_memory
from lib.io.folders import claim_stage

# the steps notebook 06 calls, the engine's among them
__all__ = [
    "EvalConfig",
    "ask",
    "finish",
    "invalid_summary",
    "items_to_ask",
    "main",
    "merge",
    "rescore_folder",
    "resolved",
    "run",
    "run_of",
    "shard",
]


def run_of(cfg: EvalConfig, out: str | Path) -> Path:
    """The run folder ``stage:`` paths name: the run the config was resolved for (``--run``, else its
    profile's), wherever ``out`` is; ``out``'s parent for a config made without a profile or a run."""
    origin = getattr(cfg, "origin", None) or {}
    if origin.get("profile") is not None or origin.get("run", "default") != "default":
        return run_dir(origin["run"])
    return Path(out).parent


def resolved(cfg: EvalConfig, run_folder: str | Path) -> EvalConfig:
    """The config with ``stage:`` paths made paths of this run and the demo datasets (stage 00's)
    added when ``demo_data`` asks for them; what is not there (a model ``stage:05_train/best`` names,
    stage 00's datasets) raises :class:`~lib.io.artifacts.MissingOutputs`, one line per problem."""
    datasets = {
        name: artifacts.resolve(folder, run_folder) for name, folder in cfg.datasets.items()
    }
    problems = artifacts.missing_models(cfg.models, run_folder)
    if cfg.demo_data:
        demo = artifacts.datasets_of(run_folder, artifacts.SETUP)
        if not demo:
            problems.append(
                f"demo_data: no datasets in {artifacts.stage_folder(run_folder, artifacts.SETUP) / artifacts.DATASETS}; run "
                f"stage 00_setup of run {Path(run_folder).name} first, or set demo_data=false"
            )
        datasets.update({name: str(folder) for name, folder in demo.items()})
    if problems:
        raise artifacts.MissingOutputs("\n".join(problems))
    models = {label: artifacts.resolve_spec(spec, run_folder) for label, spec in cfg.models.items()}
    return config.replaced(cfg, datasets=datasets, models=models, demo_data=False)


def items_to_ask(
    cfg: EvalConfig, out: str | Path
) -> tuple[EvalConfig, dict[str, tuple[Path, ItemsAt]]]:
    """The config with its run's paths (:func:`resolved` in :func:`run_of`; the later steps take it)
    and each dataset's folder and items to ask (:func:`lib.eval.items.load_eval_items`)."""
    cfg = resolved(cfg, run_of(cfg, out))
    return cfg, load_eval_items(cfg)


def finish(cfg: EvalConfig, out: str | Path, counts: dict, scores: dict) -> dict:
    """The summary - ``scores`` (:func:`~lib.eval.rescore.rescore_folder`'s) then ``counts``
    (:func:`~lib.eval.ask.ask`'s) - and the
    provenance of ``cfg`` (:func:`items_to_ask`'s, with this run's paths)."""
    return config.finish(Path(out), artifacts.EVALUATE, cfg, {**scores, **counts})


@config.stage_run
def run(cfg: EvalConfig, out: str | Path, store=None, progress: bool = True) -> dict:
    """The stage, step by step as notebook 06 runs it: the items to ask, every model on every dataset
    in every style with open answers judged (:func:`~lib.eval.ask.ask`), the tables scored from what
    was stored (:func:`~lib.eval.rescore.rescore_folder`), summary and provenance. ``out`` must
    be this stage's folder (:func:`lib.io.folders.claim_stage`), marked once the inputs are found.
    Under torchrun the other ranks first wait for the main rank, which claims the folder before it
    gets here (:func:`lib.config.stage_run`): a part written into a folder not yet claimed would
    make it look like someone else's."""
    ranks().barrier()  # alone: nothing to wait for
    claim_stage(out, artifacts.EVALUATE, write=False)
    cfg, data = items_to_ask(cfg, out)
    claim_stage(out, artifacts.EVALUATE, write=ranks().main)
    counts = ask(cfg, out, data, store, progress)
    if not ranks().main:
        return {}  # the main rank scores and writes the summary
    del data  # rescoring reads what it needs back
    # what the models used, before rescoring adds its own; the collector's pass (a walk over every
    # object, torch's included) only where a model outlived its last reference
    release_memory(collect=bool(LET_GO))
    return finish(cfg, out, counts, rescore_folder(out))


def shard(cfg: EvalConfig, out: str | Path, part: Ranks, store=None, progress: bool = True) -> dict:
    """Shard ``part.rank`` of ``part.world``: the share of the questions that rank of a ``torchrun``
    job asks (:func:`~lib.eval.ask.ask_shard`), written to its own part for :func:`merge`; returns
    what the part was made from. The shards of a Slurm array run at the same time, so a shard does
    not take the run folder's lock (:func:`lib.config.stage_run`, which the stage and :func:`merge`
    hold while they write the stage's files): it writes nothing but its part, atomically, and holds
    that part's own lock instead, so two processes never write one part at once and :func:`merge`
    never takes a part that is being written."""
    config.check_values(cfg, f"{type(cfg).__name__} (as shard() got it)")
    if ranks().world > 1:
        raise config.ParamsError(
            "shard runs as one process; under torchrun the ranks split the questions themselves: "
            "run the stage's own command"
        )
    claim_stage(
        out, artifacts.EVALUATE, write=False
    )  # a folder of another kind: refused, untouched
    cfg, data = items_to_ask(cfg, out)
    claim_stage(
        out, artifacts.EVALUATE
    )  # the stage's folder, made and marked: what merge() then takes
    with RunLock(shard_folder(out, part)):
        return ask_shard(cfg, out, data, part, store, progress)


@config.stage_run
def merge(
    cfg: EvalConfig, out: str | Path, num_shards: int, store=None, progress: bool = True
) -> dict:
    """The rest of the stage after ``num_shards`` shards (:func:`shard`), as :func:`run` does it
    after asking: the parts checked and merged into the predictions one process writes
    (:func:`~lib.eval.ask.ask_merged`), judged, the tables scored, summary and provenance. The
    parts' locks are held throughout (a part still being written is refused), and the parts are
    removed only once the summary is written: a merge that fails can be run again."""
    cfg, data = items_to_ask(cfg, out)
    with held_parts(out, num_shards):
        counts = ask_merged(cfg, out, data, num_shards, store, progress)
        del data
        release_memory()
        summary = finish(cfg, out, counts, rescore_folder(out))
        remove_parts(out, num_shards)
    return summary


PROG = "python -m lib.stages.evaluate"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["shard"], ["merge"]):
        return cluster_main(argv)
    if argv[:1] != ["rescore"]:
        return cli.main(PROG, EvalConfig, run, argv, description="Stage 06: evaluate.")
    ap = argparse.ArgumentParser(prog=PROG, description="Evaluation tools.")
    sub = ap.add_subparsers(dest="command", required=True)
    rs = sub.add_parser(
        "rescore", help="recompute metrics.csv, levels.csv, errors.csv from stored outputs"
    )
    rs.add_argument(
        "--run", required=True, type=cli.run_name, help="the run whose 06_evaluate to rescore"
    )
    rs.add_argument(
        "--unverified",
        action="store_true",
        help="rescore a folder without a matching manifest.json",
    )
    args = ap.parse_args(argv)
    folder = stage_dir(args.run, artifacts.EVALUATE, create=False)
    stale = artifacts.stale_tables(folder) if folder.is_dir() else None
    try:
        summary = rescore_folder(folder, unverified=args.unverified)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        if stale:
            print(f"the tables in {folder} are stale and stay refused: {stale}", file=sys.stderr)
        return 2
    if stale:
        print(f"replaced stale tables: {stale}", file=sys.stderr)
    print(json.dumps({"folder": str(folder), **summary}))
    return 0


def cluster_main(argv: list[str]) -> int:
    """``shard``: one shard's part (:func:`shard`); ``merge``: the parts merged and the stage
    finished (:func:`merge`). A shard out of range, a part missing or made for another config, or a
    busy run is an ``error:`` (exit code 2)."""
    command = argv[0]
    ap = cli.parser(f"{PROG} {command}", f"Stage 06: {command} (a cluster's array of shards).")
    if command == "shard":
        ap.add_argument("--shard", type=int, required=True, help="this shard: 0 .. num-shards - 1")
    ap.add_argument(
        "--num-shards", type=int, required=True, help="how many shards ask the questions"
    )
    args = ap.parse_args(argv[1:])
    cli.check_shards(ap, args)
    stage = cli.resolved(EvalConfig, args)
    if stage is None:
        return 2
    out = Path(args.out) if args.out else stage.out
    try:
        if command == "shard":  # each claims out as the stage's folder, as run() does
            summary = shard(stage.cfg, out, Ranks(args.shard, args.num_shards))
        else:
            summary = merge(stage.cfg, out, args.num_shards)
    except (*cli.INPUT_ERRORS, PartRefused) as e:
        print("\n".join(f"error: {line}" for line in str(e).splitlines()), file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
