"""Stage 04, step by step: the main Scrapbook dataset, its previews and counts, any further named
sets, the paper comparison.

    run(ScrapbookConfig(n_sets=1), out)                   # every step, as notebook 04 calls them
    python -m lib.stages.scrapbook --profile demo         # -> outputs/demo/04_scrapbook

For cluster runs, the main dataset in shards (its config read as the stage reads it), then merged:

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
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import ClassVar

import pandas as pd

from lib import artifacts as A
from lib import cli, config, plots
from lib.families.scrapbook import explore, figures, paper
from lib.families.scrapbook.generate import generate
from lib.families.scrapbook.merge import merge
from lib.families.scrapbook.params import ScrapbookParamError, ScrapbookParams
from lib.io import NotOurFolder, write_csv


@dataclass
class ScrapbookConfig(ScrapbookParams, config.StageConfig):
    """The main dataset's generator parameters (:class:`ScrapbookParams`), plus further named sets."""

    STAGE: ClassVar[str] = A.SCRAPBOOK

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
        _dataset(cfg, out, A.SCRAPBOOK_DATASET),
        progress=progress,
        question_worker=cfg.question_worker,
    )


def sample_figure(cfg: ScrapbookConfig, out: str | Path):
    """The last image of the first ``cfg.n_preview`` units with the nine absolute regions drawn
    (``figures/samples``); ``(fig, ax)``."""
    main = A.dataset_folder(out, A.SCRAPBOOK_DATASET)
    fig, ax = plots.image_grid(*explore.preview(main, explore.read_scenes(main), cfg.n_preview))
    plots.save(fig, Path(out) / A.FIGURES, "samples", close=True)
    return fig, ax


def question_counts(out: str | Path) -> tuple[pd.DataFrame, tuple]:
    """The main dataset's questions per type, group, subgroup and form (its ``counts.csv``) and
    their figure (``figures/question_counts``); the table and ``(fig, ax)``."""
    counts = pd.read_csv(A.dataset_folder(out, A.SCRAPBOOK_DATASET) / "counts.csv")
    fig, ax = figures.question_counts(counts)
    plots.save(fig, Path(out) / A.FIGURES, "question_counts", close=True)
    return counts, (fig, ax)


def further_sets(cfg: ScrapbookConfig, out: str | Path, progress: bool = True) -> dict[str, dict]:
    """One dataset folder per entry of ``cfg.sets`` (``datasets/<name>``, the stage's seed unless the
    set names its own); name -> its folder, images, questions and placement failures."""
    briefs = {}
    for name in cfg.sets:
        if name == A.SCRAPBOOK_DATASET:
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
    table = paper.reproduction(A.dataset_folder(out, A.SCRAPBOOK_DATASET))
    write_csv(Path(out) / A.PAPER, table)
    return table


def finish(cfg: ScrapbookConfig, out: str | Path, stats: dict, sets: dict[str, dict]) -> dict:
    """The summary from what the steps returned (:func:`main_dataset`'s statistics, :func:`further_sets`'
    briefs) and provenance."""
    main = A.dataset_folder(out, A.SCRAPBOOK_DATASET)
    summary = {"datasets": {A.SCRAPBOOK_DATASET: _brief(stats, main), **sets}}
    summary.update({k: stats[k] for k in ("images", "questions", "by_type", "placement_failures")})
    return config.finish(Path(out), A.SCRAPBOOK, cfg, summary)


@config.stage_run
def run(cfg: ScrapbookConfig, out: str | Path, progress: bool = True) -> dict:
    """The stage, step by step as notebook 04 runs it: the main dataset, its sample and counts
    figures, the further sets, the paper comparison when asked for, summary and provenance."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stats = main_dataset(cfg, out, progress)
    sample_figure(cfg, out)
    question_counts(out)
    sets = further_sets(cfg, out, progress)
    paper_table(cfg, out)
    return finish(cfg, out, stats, sets)


def _dataset(cfg: ScrapbookConfig, out: str | Path, name: str) -> Path:
    """The folder of dataset ``name``, the config checked again first (a notebook cell may have edited
    it since it was made); a folder that a link would put outside ``out`` is refused."""
    config.check_values(cfg, type(cfg).__name__)
    folder = A.dataset_folder(out, name)
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


def cluster_main(argv: list[str]) -> int:
    """``shard``: one shard of the main dataset into ``--out`` (the dataset folder alone), its config
    resolved as the stage's (profile, params files, ``--set``); ``merge``: shard folders joined into
    ``--out``, byte for byte the unsharded dataset. Prints the dataset's statistics; a bad set of
    shards or an ``--out`` that holds something else is an ``error:`` (exit code 2), nothing written."""
    if argv[0] == "merge":
        ap = argparse.ArgumentParser(prog=f"{PROG} merge", description="Merge Scrapbook shards.")
        ap.add_argument("--out", required=True)
        ap.add_argument("shards", nargs="+")
        args = ap.parse_args(argv[1:])
        job = lambda: merge(args.shards, args.out)
    else:
        ap = cli.parser(f"{PROG} shard", "One shard of stage 04's main Scrapbook dataset.")
        ap.add_argument("--shard", type=int, required=True)
        ap.add_argument("--num-shards", type=int, required=True)
        args = ap.parse_args(argv[1:])
        if not args.out:
            ap.error("--out: the shard's folder")
        stage = cli.resolved(ScrapbookConfig, args)
        if stage is None:
            return 2
        cfg = stage.cfg
        job = lambda: generate(
            cfg.params(), args.out, args.shard, args.num_shards, question_worker=cfg.question_worker
        )
    try:
        stats = job()
    except (
        ScrapbookParamError,
        NotOurFolder,
    ) as e:  # a shard out of range or missing, --out not a dataset
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        json.dumps(
            {k: stats[k] for k in ("images", "questions", "by_type", "placement_failures")},
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["shard"], ["merge"]):
        sys.exit(cluster_main(sys.argv[1:]))
    sys.exit(cli.main(PROG, ScrapbookConfig, run, description="Stage 04: Scrapbook."))
