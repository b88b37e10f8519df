"""What a family brings to stage 07 beyond its tasks' tables: its ``ANALYSIS`` (an
:class:`Analysis`), asked by the stage for figures, tables, the paper's stated numbers beside ours,
and texts for the topic model, each from the run's folder and, where the family has one, the
folder of its public release (``paper_data: {<family>: <folder>}`` in stage 07's params).

Every method returns nothing by default, so a family overrides what it has; the stage names no
family. A task's own tables and figures from stage 06's results stay its
:meth:`lib.tasks.Task.paper`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


class Analysis:
    """A family's stage-07 contributions; ``run_folder`` is the run's folder (``outputs/<run>``),
    ``data`` its release folder from ``paper_data`` ("" when none is given)."""

    def figures(self, run_folder: Path, data: str) -> dict[str, tuple]:
        """Figures from what earlier stages wrote or the release holds: name -> ``(fig, ax)``."""
        return {}

    def tables(self, run_folder: Path, data: str) -> dict[str, pd.DataFrame]:
        """Tables from what earlier stages wrote (e.g. stage 03's audit): name -> table."""
        return {}

    def paper(self, run_folder: Path, data: str) -> pd.DataFrame | None:
        """The paper's stated numbers beside ours (:func:`lib.core.papers.paper_frame` rows), or None."""
        return None

    def documents(self, run_folder: Path, data: str) -> list[str]:
        """Texts of the family's own for the topic model (e.g. a release's descriptions)."""
        return []
