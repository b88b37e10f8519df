"""Stage 07's YesBut parts (the family's ``ANALYSIS``): Figure 3 from this run's stage-02
annotations; with the release's folder (``paper_data: {yesbut: <clone>}``) Figure 3 from its
annotations, Figure 14 from its human evaluation, its half descriptions for the topic model, and
the paper's numbers beside ours (:func:`lib.families.yesbut.paper.yesbut_reproduction`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lib.families.yesbut import figures
from lib.families.yesbut.human import HUMAN_EVAL_CSV
from lib.families.yesbut.paper import figure3_counts, human_eval, yesbut_reproduction
from lib.families.yesbut.release import ANNOTATIONS_CSV, read_yesbut_annotations
from lib.io import AnnotationStore, artifacts
from lib.tasks.analysis import Analysis

FIGURE3_FIELDS = ["text_in_left", "text_in_right", "connected", "difficulty"]


def release_annotations(data: str) -> dict:
    """The release's stage-2 annotations by image ({} without its folder)."""
    return read_yesbut_annotations(Path(data) / ANNOTATIONS_CSV) if data else {}


class YesButAnalysis(Analysis):
    def figures(self, run_folder: Path, data: str) -> dict[str, tuple]:
        drawn = {}
        human = (
            AnnotationStore(artifacts.annotations_path(run_folder)).table().drop_duplicates("item")
        )
        if set(FIGURE3_FIELDS) <= set(human.columns):
            drawn["yesbut_fig3_demo_annotations"] = figures.yesbut_fig3(
                figure3_counts(human.dropna(subset=FIGURE3_FIELDS))
            )
        release = release_annotations(data)
        if release:
            drawn["yesbut_fig3"] = figures.yesbut_fig3(
                figure3_counts(pd.DataFrame(release.values()))
            )
            if (Path(data) / HUMAN_EVAL_CSV).exists():
                drawn["yesbut_fig14_human_eval"] = figures.human_eval_bars(
                    human_eval(Path(data) / HUMAN_EVAL_CSV)
                )
        return drawn

    def paper(self, run_folder: Path, data: str) -> pd.DataFrame | None:
        return yesbut_reproduction(data) if data else None

    def documents(self, run_folder: Path, data: str) -> list[str]:
        halves = ("left_description", "right_description")
        return [h[k] for h in release_annotations(data).values() for k in halves]
