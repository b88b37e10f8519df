"""Stage 04, step by step: the main Scrapbook dataset, its previews and counts, any further named
sets, the paper comparison.

    run(ScrapbookConfig(n_sets=1), out)                   # every step, as notebook 04 calls them
    python -m lib.stages.scrapbook --profile demo         # -> outputs/demo/04_scrapbook

For cluster runs (a Slurm array, :mod:`lib.pipeline.scheduler.slurm`), the main dataset in shards, each a job
of its own, then merged and the stage finished (the config of each resolved as the stage resolves
it: ``--profile``, ``--params``, ``--set``, ``--run``):

    python -m lib.stages.scrapbook shard --profile P --shard i --num-shards k   # i = 0 .. k-1
    python -m lib.stages.scrapbook merge --profile P --num-shards k   # then run()'s other steps

or, the dataset alone, shards and their merge in folders of one's own choosing:

    python -m lib.stages.scrapbook shard --profile unique_all --shard i --num-shards k --out DIR_i
    python -m lib.stages.scrapbook merge --out DIR DIR_0 DIR_1 ...

Writes ``datasets/scrapbook/`` (images, masks, scenes, items, counts.csv, concepts.csv), one
``datasets/<name>/`` per entry of ``sets`` (e.g. the scenes stage 05 trains on and a fresh set
stage 06 evaluates: every Scrapbook dataset of a run is made here), the figures, ``summary.json``
and ``provenance.json``. ``run()`` checks its config again and holds the run's lock
(:func:`lib.config.stage_run`); the steps that write a dataset check the config too and write only
inside ``out``; no command writes over a folder that is not a Scrapbook dataset.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import ClassVar

import pandas as pd

from lib import config
from lib.config import cli
from lib.core.paths import RunLock
from lib.families.scrapbook import explore, figures, paper
from lib.families.scrapbook.generate import generate
from lib.families.scrapbook.merge import merge as merge_datasets
from lib.families.scrapbook.params import ScrapbookParamError, ScrapbookParams
from lib.io import artifacts, shards, write_csv
from lib.io.folders import claim_stage
from lib.pages import plots


@dataclass
class ScrapbookConfig(ScrapbookParams, config.StageConfig):
    """The main dataset's generator parameters (:class:`ScrapbookParams`), plus further named sets."""

    STAGE: ClassVar[str] = artifacts.SCRAPBOOK

    sets: dict[str, dict] = field(
        default_factory=dict
    )  # name -> ScrapbookParams overrides (seed: the stage's)
    n_preview: int = 6  # images shown with the region grid
    compare_to_paper: bool = (
        False  # the main dataset has Table 2's parameters: write paper.csv beside the paper
    )
    # make each set's question lines in a forked process while this one renders its images: the
    # same bytes, sooner on a large set (benchmarks/scrapbook.py measures it on unique_all)
    question_worker: bool = False

    def params(self) -> ScrapbookParams:
        """The main dataset's generator parameters."""
        return ScrapbookParams(**{f.name: getattr(self, f.name) for f in fields(ScrapbookParams)})

    def set_params(self, name: str) -> ScrapbookParams:
        return ScrapbookParams.from_dict(
            {"seed": self.seed, **self.sets[name]}, source=f"sets.{name}"
        )

    def check(self, source: str) -> None:
        """The values (folders of external data are looked at when generating, not here)."""
        try:
            self.params().validate(check_files=False)
        except config.ParamsError as e:
            raise config.ParamsError(f"{source}: {e}") from None
        hints = typing.get_type_hints(ScrapbookParams)
        for name, overrides in self.sets.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):  # it becomes a folder name
                raise config.ParamsError(
                    f"{source}: sets: {name!r} is not a dataset name (letters, digits, _ and -)"
                )
            for key, value in overrides.items():
                if key in hints:
                    config.check_type(value, hints[key], f"{source}: sets.{name}.{key}")
            try:
                self.set_params(name).validate(check_files=False)
            except config.ParamsError as e:
                raise config.ParamsError(f"{source}: sets.{name}: {e}") from None


def main_dataset(cfg: ScrapbookConfig, out: str | Path, progress: bool = True) -> dict:
    """The main dataset (``datasets/scrapbook``: images, masks, scenes, items, counts.csv,
    concepts.csv) from ``cfg.params()``, validated first; returns the generator's statistics."""
    return generate(
        cfg.params(),
        _dataset(cfg, out, artifacts.SCRAPBOOK_DATASET),
        progress=progress,
        question_worker=cfg.question_worker,
    )


def sample_figure(cfg: ScrapbookConfig, out: str | Path):
    """The last image of the first ``cfg.n_preview`` units with the nine absolute regions drawn
    (``figures/samples``); ``(fig, ax)``."""
    main = artifacts.dataset_folder(out, artifacts.SCRAPBOOK_DATASET)
    fig, ax = plots.image_grid(*explore.preview(main, explore.read_scenes(main), cfg.n_preview))
    plots.save(fig, Path(out) / artifacts.FIGURES, "samples", close=True)
    return fig, ax


def question_counts(out: str | Path) -> tuple[pd.DataFrame, tuple]:
    """The main dataset's questions per type, group, subgroup and form (its ``counts.csv``) and
    their figure (``figures/question_counts``); the table and ``(fig, ax)``."""
    counts = pd.read_csv(artifacts.dataset_folder(out, artifacts.SCRAPBOOK_DATASET) / "counts.csv")
    fig, ax = figures.question_counts(counts)
    plots.save(fig, Path(out) / artifacts.FIGURES, "question_counts", close=True)
    return counts, (fig, ax)


def further_sets(cfg: ScrapbookConfig, out: str | Path, progress: bool = True) -> dict[str, dict]:
    """One dataset folder per entry of ``cfg.sets`` (``datasets/<name>``, the stage's seed unless the
    set names its own); name -> its folder, images, questions and placement failures."""
    briefs = {}
    for name in cfg.sets:
        if name == artifacts.SCRAPBOOK_DATASET:
            raise config.ParamsError(f"sets: {name!r} is the main dataset's name; choose another")
        folder = _dataset(cfg, out, name)
        briefs[name] = _brief(
            generate(
                cfg.set_params(name), folder, progress=progress, question_worker=cfg.question_worker
            ),
            folder,
        )
    return briefs


def paper_table(cfg: ScrapbookConfig, out: str | Path) -> pd.DataFrame | None:
    """When ``cfg.compare_to_paper``: the main dataset's Unique All counts beside the paper's
    (``paper.csv``, :func:`lib.families.scrapbook.paper.reproduction`); None otherwise."""
    if not cfg.compare_to_paper:
        return None
    table = paper.reproduction(artifacts.dataset_folder(out, artifacts.SCRAPBOOK_DATASET))
    write_csv(Path(out) / artifacts.PAPER, table)
    return table


def finish(cfg: ScrapbookConfig, out: str | Path, stats: dict, sets: dict[str, dict]) -> dict:
    """The summary from what the steps returned (:func:`main_dataset`'s statistics, :func:`further_sets`'
    briefs) and provenance."""
    main = artifacts.dataset_folder(out, artifacts.SCRAPBOOK_DATASET)
    summary = {"datasets": {artifacts.SCRAPBOOK_DATASET: _brief(stats, main), **sets}}
    summary.update({k: stats[k] for k in ("images", "questions", "by_type", "placement_failures")})
    return config.finish(Path(out), artifacts.SCRAPBOOK, cfg, summary)


@config.stage_run
def run(cfg: ScrapbookConfig, out: str | Path, progress: bool = True) -> dict:
    """The stage, step by step as notebook 04 runs it: the main dataset, its sample and counts
    figures, the further sets, the paper comparison when asked for, summary and provenance."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return _after_main(cfg, out, main_dataset(cfg, out, progress), progress)


def _after_main(cfg: ScrapbookConfig, out: Path, stats: dict, progress: bool) -> dict:
    """The steps after the main dataset (``stats``: its statistics), for :func:`run` and
    :func:`merge` alike."""
    sample_figure(cfg, out)
    question_counts(out)
    sets = further_sets(cfg, out, progress)
    paper_table(cfg, out)
    return finish(cfg, out, stats, sets)


SHARDS = "shards"  # a sharded run's shards, inside the stage's folder until the merge finishes it


def shard_folder(out: str | Path, shard: int, num_shards: int) -> Path:
    """Where shard ``shard`` of ``num_shards`` holds its lock, its dataset in ``datasets/scrapbook``
    below (a folder apart from the dataset, which is built aside and swapped in whole)."""
    return Path(out) / SHARDS / f"{shard}-of-{num_shards}"


def shard(
    cfg: ScrapbookConfig, out: str | Path, index: int, num_shards: int, progress: bool = True
) -> dict:
    """Shard ``index`` of ``num_shards`` of the main dataset (every ``num_shards``-th unit) in its
    folder (:func:`shard_folder`) for :func:`merge`; the generator's statistics. The shards of a
    Slurm array run at the same time, so a shard does not take the run folder's lock (which
    :func:`run` and :func:`merge` hold while they write the stage's files): it writes nothing but
    its own folder and holds that folder's lock instead, so two processes never make one shard."""
    if not 0 <= index < num_shards:
        raise ScrapbookParamError(f"--shard {index} must be in [0, --num-shards={num_shards})")
    folder = shard_folder(out, index, num_shards)
    claim_stage(
        out, artifacts.SCRAPBOOK
    )  # the stage's folder, made and marked: what merge() then takes
    with RunLock(folder):
        dataset = _dataset(cfg, folder, artifacts.SCRAPBOOK_DATASET)
        return generate(cfg.params(), dataset, index, num_shards, progress, cfg.question_worker)


@config.stage_run
def merge(cfg: ScrapbookConfig, out: str | Path, num_shards: int, progress: bool = True) -> dict:
    """The stage after ``num_shards`` shards (:func:`shard`), as :func:`run` goes on after the main
    dataset: the shards checked against ``cfg`` (:func:`checked_shards`) and merged into
    ``datasets/scrapbook``, the bytes one process writes
    (:func:`lib.families.scrapbook.merge.merge`), then the figures, further sets, paper table,
    summary and provenance. The shards' locks are held throughout (a shard still being made is
    refused), and the shards are removed only once the stage is finished."""
    out = Path(out)
    parts = [shard_folder(out, k, num_shards) for k in range(num_shards)]
    with shards.held(out, parts, "shards", "being made", ScrapbookParamError):
        folders = checked_shards(cfg, out, num_shards)
        stats = merge_datasets(folders, _dataset(cfg, out, artifacts.SCRAPBOOK_DATASET))
        summary = _after_main(cfg, out, stats, progress)
        shards.remove(parts, out / SHARDS)
    return summary


def checked_shards(cfg: ScrapbookConfig, out: str | Path, num_shards: int) -> list[Path]:
    """The datasets of the ``num_shards`` shards in ``out``, each made with ``cfg``'s generator
    parameters as that shard of that many; one :class:`ScrapbookParamError` naming every shard
    that is missing, unfinished or made otherwise, and how to make it (the merge then checks the
    shards' files and units)."""
    wanted = json.loads(json.dumps(asdict(cfg.params())))  # as a shard's summary.json holds them
    folders, problems = [], []
    for k in range(num_shards):
        folder = artifacts.dataset_folder(
            shard_folder(out, k, num_shards), artifacts.SCRAPBOOK_DATASET
        )
        try:
            made = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
            params, at = dict(made["params"].items()), (made["shard"], made["num_shards"])
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            problems.append(f"{folder}: missing or unfinished (no readable summary.json)")
            continue
        differ = sorted(key for key in wanted if params.get(key) != wanted[key])
        if at != (k, num_shards):
            problems.append(
                f"{folder}: says it is shard {at[0]} of {at[1]}, not {k} of {num_shards}"
            )
        elif differ:
            problems.append(
                f"{folder}: made with other {', '.join(differ)} than this merge's config"
            )
        folders.append(folder)
    if problems:
        raise ScrapbookParamError(
            "\n".join(
                [
                    f"{out}: the {num_shards} shards of the main dataset cannot be merged:",
                    *problems,
                    f"make each shard with the merge's --profile/--params/--set: {PROG} shard "
                    f"--shard K --num-shards {num_shards}",
                ]
            )
        )
    return folders


def _dataset(cfg: ScrapbookConfig, out: str | Path, name: str) -> Path:
    """The folder of dataset ``name``, the config checked again first (a notebook cell may have edited
    it since it was made); a folder that a link would put outside ``out`` is refused."""
    config.check_values(cfg, type(cfg).__name__)
    folder = artifacts.dataset_folder(out, name)
    if not folder.resolve().is_relative_to(Path(out).resolve()):
        raise config.ParamsError(
            f"{folder} is {folder.resolve()}, outside {out}: a stage writes only inside its own "
            f"folder; remove the link or choose another folder"
        )
    return folder


def _brief(stats: dict, folder: Path) -> dict:
    return {
        "folder": str(folder),
        "images": stats["images"],
        "questions": stats["questions"],
        "placement_failures": stats["placement_failures"],
    }


PROG = "python -m lib.stages.scrapbook"
DESCRIPTIONS = {
    "shard": "Stage 04: one shard of the main Scrapbook dataset, in the run's shards/ "
    "(with --out: in that folder, the dataset alone).",
    "merge": "Stage 04: the run's --num-shards shards merged and the stage finished "
    "(or shard folders merged into --out, the dataset alone).",
}


def cluster_main(argv: list[str]) -> int:
    """``shard``: one shard of the main dataset (:func:`shard`; with ``--out``, into that folder
    alone); ``merge``: the run's shards merged and the stage finished (:func:`merge`), or shard
    folders given by name joined into ``--out``, byte for byte the unsharded dataset. Prints the
    dataset's statistics; a bad set of shards, a busy shard or run, or an ``--out`` that holds
    something else is an ``error:`` (exit code 2), nothing written."""
    command = argv[0]
    ap = cli.parser(f"{PROG} {command}", DESCRIPTIONS[command])
    if command == "shard":
        ap.add_argument("--shard", type=int, required=True, help="this shard: 0 .. num-shards - 1")
    else:
        ap.add_argument("shards", nargs="*", help="shard folders to merge into --out (no stage)")
    ap.add_argument(
        "--num-shards", type=int, required=command == "shard", help="how many shards there are"
    )
    args = ap.parse_args(argv[1:])
    job = _cluster_job(ap, command, args)
    if job is None:
        return 2
    try:
        stats = job()
    except (ScrapbookParamError, *cli.INPUT_ERRORS) as e:  # a shard out of range or missing...
        print("\n".join(f"error: {line}" for line in str(e).splitlines()), file=sys.stderr)
        return 2
    keys = ("images", "questions", "by_type", "placement_failures")
    print(json.dumps({k: stats[k] for k in keys}, indent=1))
    return 0


def _cluster_job(ap: argparse.ArgumentParser, command: str, args: argparse.Namespace):
    """What :func:`cluster_main` runs for ``args`` (a call taking nothing); None after a bad
    parameter's error, a usage error exits."""
    if command == "merge" and args.shards:
        if args.num_shards is not None or args.profile or args.params or args.set or args.run:
            ap.error("shard folders and --out, or --num-shards and the run's config: not both")
        if not args.out:
            ap.error("--out: the merged dataset's folder")
        return lambda: merge_datasets(args.shards, args.out)
    if args.num_shards is None:
        ap.error("--num-shards: how many of the run's shards to merge (or shard folders and --out)")
    cli.check_shards(ap, args)
    stage = cli.resolved(ScrapbookConfig, args)
    if stage is None:
        return None
    cfg, k = stage.cfg, args.num_shards
    if command == "merge":
        out = Path(args.out) if args.out else stage.out
        return lambda: merge(cfg, out, k)
    if args.out:  # the dataset alone, in a folder of one's own choosing
        return lambda: generate(
            cfg.params(), args.out, args.shard, k, question_worker=cfg.question_worker
        )
    return lambda: shard(cfg, stage.out, args.shard, k)


if __name__ == "__main__":
    if sys.argv[1:2] in (["shard"], ["merge"]):
        sys.exit(cluster_main(sys.argv[1:]))
    sys.exit(cli.main(PROG, ScrapbookConfig, run, description="Stage 04: Scrapbook."))
