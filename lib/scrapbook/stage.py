"""Stage 04 as one call: the main Scrapbook dataset, any further named sets, previews, tables.

    run(ScrapbookConfig(n_sets=1), out)                   # what notebook 04 does
    python -m lib.scrapbook --profile demo          # -> outputs/demo/04_scrapbook

Writes ``datasets/scrapbook/`` (images, masks, scenes, items, counts.csv, concepts.csv), one
``datasets/<name>/`` per entry of ``sets`` (e.g. the scenes stage 05 trains on and a fresh set
stage 06 evaluates: every Scrapbook dataset of a run is made here), the figures, ``summary.json``
and ``provenance.json``.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import ClassVar

import pandas as pd

from lib import artifacts as A
from lib import config, plots
from lib.io import write_csv
from lib.scrapbook import explore, paper
from lib.scrapbook.generate import ScrapbookParams, generate


@dataclass
class ScrapbookConfig(ScrapbookParams, config.StageConfig):
    """The main dataset's generator parameters (:class:`ScrapbookParams`), plus further named sets."""

    STAGE: ClassVar[str] = A.SCRAPBOOK

    sets: dict[str, dict] = field(default_factory=dict)  # name -> ScrapbookParams overrides (seed: the stage's)
    n_preview: int = 6  # images shown with the region grid
    compare_to_paper: bool = False  # the main dataset has Table 2's parameters: write paper.csv beside the paper

    def params(self) -> ScrapbookParams:
        """The main dataset's generator parameters."""
        return ScrapbookParams(**{f.name: getattr(self, f.name) for f in fields(ScrapbookParams)})

    def set_params(self, name: str) -> ScrapbookParams:
        return ScrapbookParams.from_dict({"seed": self.seed, **self.sets[name]}, source=f"sets.{name}")

    def check(self, source: str) -> None:
        """The values (folders of external data are looked at when generating, not here)."""
        try:
            self.params().validate(check_files=False)
        except config.ParamsError as e:
            raise config.ParamsError(f"{source}: {e}") from None
        hints = typing.get_type_hints(ScrapbookParams)
        for name, overrides in self.sets.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):  # it becomes a folder name
                raise config.ParamsError(f"{source}: sets: {name!r} is not a dataset name (letters, digits, _ and -)")
            for key, value in overrides.items():
                if key in hints:
                    config.check_type(value, hints[key], f"{source}: sets.{name}.{key}")
            try:
                self.set_params(name).validate(check_files=False)
            except config.ParamsError as e:
                raise config.ParamsError(f"{source}: sets.{name}: {e}") from None


def run(cfg: ScrapbookConfig, out: str | Path, progress: bool = True) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    main = A.dataset_folder(out, A.SCRAPBOOK_DATASET)
    stats = generate(cfg.params(), main, progress=progress)
    fig, _ = plots.image_grid(*explore.preview(main, explore.read_scenes(main), cfg.n_preview))
    plots.save(fig, out / A.FIGURES, "samples", close=True)
    fig, _ = plots.question_counts(pd.read_csv(main / "counts.csv"))
    plots.save(fig, out / A.FIGURES, "question_counts", close=True)
    summary = {"datasets": {A.SCRAPBOOK_DATASET: _brief(stats, main)}}
    for name in cfg.sets:
        if name == A.SCRAPBOOK_DATASET:
            raise config.ParamsError(f"sets: {name!r} is the main dataset's name; choose another")
        folder = A.dataset_folder(out, name)
        summary["datasets"][name] = _brief(generate(cfg.set_params(name), folder, progress=progress), folder)
    summary.update({k: stats[k] for k in ("images", "questions", "by_type", "placement_failures")})
    if cfg.compare_to_paper:
        write_csv(out / A.PAPER, paper.reproduction(main))
    return config.finish(out, A.SCRAPBOOK, cfg, summary)


def _brief(stats: dict, folder: Path) -> dict:
    return {"folder": str(folder), "images": stats["images"], "questions": stats["questions"],
            "placement_failures": stats["placement_failures"]}
