"""Many comparisons at once: p-values adjusted across the rows a comparison shows.

A comparison reports one paired test per dataset x task x model x style x metric; with dozens of
rows some fall below 0.05 by chance. Holm's (1979, Scand. J. Statist. 6(2)) step-down adjustment
controls the family-wise error (the chance that any surviving row is a false positive) with no
assumption on how the tests depend on each other; Benjamini and Hochberg's (1995, J. R. Statist.
Soc. B 57(1)) step-up adjustment controls the false discovery rate (the expected share of false
positives among the surviving rows), which is the gentler claim a reader scanning a table needs.
A row survives a correction when its adjusted p is below the level. Rows without a p (None or NaN:
too few clusters) are not in the family and get no adjusted p.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

LEVEL = 0.05  # the level an adjusted p must fall below for its row to survive


def _family(p: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the p-values in the family (not None, not NaN) and those values."""
    at = np.array([i for i, v in enumerate(p) if v is not None and not math.isnan(v)], dtype=int)
    return at, np.array([float(p[i]) for i in at])


def _placed(p: Sequence, at: np.ndarray, adjusted: np.ndarray) -> list[float | None]:
    out: list[float | None] = [None] * len(p)
    for i, v in zip(at, adjusted):
        out[int(i)] = float(min(1.0, v))
    return out


def holm(p: Sequence) -> list[float | None]:
    """Holm's step-down adjusted p-values, in the order given: sorted ascending, the k-th smallest
    (k from 1) times ``m - k + 1``, made non-decreasing, capped at 1. Written here because scipy,
    a dependency, has Benjamini-Hochberg but not Holm, and statsmodels is only the tests' reference."""
    at, values = _family(p)
    m = len(values)
    order = np.argsort(values, kind="stable")
    scaled = values[order] * (m - np.arange(m))
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(np.minimum(scaled, 1.0)) if m else scaled
    return _placed(p, at, adjusted)


def benjamini_hochberg(p: Sequence) -> list[float | None]:
    """Benjamini-Hochberg's step-up adjusted p-values (q-values), in the order given
    (:func:`scipy.stats.false_discovery_control`, imported here: scipy.stats costs a second to
    import, which the report's pages, importing this module, need not pay)."""
    from scipy.stats import false_discovery_control

    at, values = _family(p)
    return _placed(p, at, false_discovery_control(values) if len(values) else values)


def survives(adjusted: float | None, level: float = LEVEL) -> bool:
    """Whether a row with this adjusted p survives the correction at ``level``."""
    return adjusted is not None and adjusted < level


def adjusted_text(p, p_holm, holm_kept, p_bh, bh_kept) -> str:
    """A row's p as a table shows it: ``p (Holm's; BH's)``, ``*`` after an adjusted p whose row
    survives; empty without a p, ``p (not adjusted)`` for a row outside the family."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ""
    if p_holm is None or (isinstance(p_holm, float) and math.isnan(p_holm)):
        return f"{p:.3g} (not adjusted)"
    mark = lambda kept: "*" if str(kept) == "True" else ""  # noqa: E731 - a table cell reads back "True"
    return f"{p:.3g} ({p_holm:.3g}{mark(holm_kept)}; {p_bh:.3g}{mark(bh_kept)})"
