"""What one item-quality audit found (:class:`Finding`), the shape every audit of
:data:`lib.items.quality.AUDITS` returns; its own module so that the audits living beside
:mod:`lib.items.quality` (:mod:`lib.items.audits`) and the module that runs them both use it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

DATASET = ["dataset", "digest"]  # a dataset version: what every per-dataset table is keyed by


@dataclass
class Finding:
    """What one audit found; every part may be empty.

    - ``items``: per item (index :data:`lib.items.bank.ITEM`) the columns it adds to ``item_stats.csv``;
    - ``flags``: per item (same index) one bool column per flag it raises;
    - ``datasets``: per dataset version (index ``dataset, digest``) its columns of ``datasets.csv``;
    - ``said``: per dataset version, one sentence a reader needs (a status, why there is none);
    - ``tables``: name -> frame, written as ``items/<name>.csv``;
    - ``figures``: name -> ``(fig, ax)``, saved under ``items/figures/``.
    """

    name: str
    items: pd.DataFrame | None = None
    flags: pd.DataFrame | None = None
    datasets: pd.DataFrame | None = None
    said: dict[tuple[str, str], str] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, tuple] = field(default_factory=dict)


Audit = Callable[[pd.DataFrame], Finding]
