"""The papers' numbers beside ours: ``lib/data/papers.yaml`` holds, per paper, the numbers its text
states (where, how - exactly, more than, rounded - and the command that reproduces them) and the
values its figures draw; :func:`paper_frame` puts ours beside them as rows of ``paper.csv``.

Each family computes its own numbers (:mod:`lib.families.yesbut.paper`,
:mod:`lib.families.memeqa.paper`); stage 07 gathers their frames into one table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import yaml

from lib.core.paths import DATA

PAPER_COLUMNS = [
    "paper",
    "quantity",
    "paper_value",
    "ours",
    "equal",
    "note",
    "command",
]  # every stage's paper.csv
STATED = ("exactly", "more than", "rounded")  # how papers.yaml says a text states a number


def papers() -> dict:
    """``lib/data/papers.yaml``: per paper, the numbers its text states, where, and the command."""
    return yaml.safe_load((DATA / "papers.yaml").read_text())


def stated_label(spec: dict) -> str:
    """A stated number's row name: what, where, and how the text states it (when not exactly)."""
    how = {
        "more than": f"; the text: more than {spec['value']}",
        "rounded": f"; the text: rounded to {spec.get('precision')}",
    }
    return f"{spec['quantity']} ({spec['where']}{how.get(spec.get('stated', 'exactly'), '')})"


def agrees(spec: dict, ours) -> bool:
    """Does ``ours`` agree with a number as the text states it: exactly, more than (a lower bound) or
    rounded (the same multiple of ``precision``)?"""
    stated, value = spec.get("stated", "exactly"), spec["value"]
    if stated not in STATED:
        raise ValueError(
            f"lib/data/papers.yaml: {spec['quantity']!r} is stated {stated!r}; use one of {STATED}"
        )
    if stated == "more than":
        return bool(ours > value)
    if stated == "rounded":
        return round(ours / spec["precision"]) == round(value / spec["precision"])
    return bool(ours == value)


def _shown(value):
    """Ours as a row shows it: counts whole, shares to two decimals (compared unrounded)."""
    if value is None:
        return None
    return round(float(value), 2) if isinstance(value, (float, np.floating)) else int(value)


def paper_frame(
    paper: str, ours: dict, drawn: dict[str, pd.Series], missing: str = "", context: str = ""
) -> pd.DataFrame:
    """A paper's rows (:data:`PAPER_COLUMNS`): each number papers.yaml says its text states, beside
    ``ours`` of the same key (absent: not computed, ``missing`` says why); then the values of ours a
    drawn figure shows, with no paper value. ``context`` is added to the note of a row that differs."""
    spec = papers()[paper]
    rows = []
    for key, q in spec["stated"].items():
        value = ours.get(key)
        equal = value is not None and agrees(q, value)
        why = q.get("differs", "not explained by the text") if value is not None else missing
        note = "" if equal else "; ".join(s for s in (why, context) if s)
        rows.append(
            [paper, stated_label(q), q["value"], _shown(value), equal, note, spec["command"]]
        )
    for key, d in spec.get("drawn", {}).items():
        for label, value in drawn.get(key, pd.Series(dtype=float)).items():
            label = ", ".join(map(str, label)) if isinstance(label, tuple) else label
            rows.append(
                [
                    paper,
                    f"{d['quantity']}: {label} ({d['where']})",
                    None,
                    _shown(value),
                    None,
                    d["note"],
                    spec["command"],
                ]
            )
    table = pd.DataFrame(rows, columns=PAPER_COLUMNS, dtype=object)
    table["equal"] = table["equal"].astype("boolean")  # blank where the text states no value
    return table


def agreement_claims() -> pd.DataFrame:
    """What each paper's text says of how its scores agree with people (papers.yaml's
    ``agreement``): paper, where, the quote, and the agreement figure it states ("none stated")."""
    rows = [
        {
            "paper": paper,
            "where": c["where"],
            "the text says": c["quote"],
            "agreement figure": c.get("figure", "none stated"),
        }
        for paper, spec in papers().items()
        for c in spec.get("agreement", ())
    ]
    return pd.DataFrame(rows, columns=["paper", "where", "the text says", "agreement figure"])
