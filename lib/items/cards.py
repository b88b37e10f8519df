"""The dataset card: a short page a person reads beside each dataset of a run, saying how many
items it has, who answered them, how hard they are, which are flagged, whether a 2PL fit was made,
and where the figures are. Written by stage 07 as ``07_analyze/items/cards/<dataset>.json`` and
``.md`` (:func:`write_cards`), from what :mod:`lib.items.quality` found."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from lib.io import atomic_file, write_json

FIGURES = "../figures"  # the item figures, relative to the cards' folder


def card(row: pd.Series, said: list[str], flags: list[str], figures: list[str]) -> dict:
    """One dataset version's card from its row of ``datasets.csv`` (:meth:`Quality.datasets`),
    its sentences, the flags there are and the figures' names."""

    def value(k):  # a plain Python value for JSON, None where absent
        v = row.get(k)
        return None if v is None or pd.isna(v) else getattr(v, "item", lambda: v)()

    return {
        "dataset": row["dataset"],
        "digest": row["digest"],
        "items": int(row["items"]),
        "respondents": int(row["respondents"]),
        "difficulty": {  # share right: 0 no one, 1 every respondent
            "q1": value("p_q1"),
            "median": value("p_median"),
            "q3": value("p_q3"),
        },
        "flags": {f: int(row[f]) for f in flags},
        "irt": value("irt"),
        "subset": value("subset"),
        "notes": said,
        "figures": [f"{FIGURES}/{name}.png" for name in figures],
    }


def markdown(c: dict) -> str:
    """The card as a few lines of Markdown."""
    d = c["difficulty"]
    share = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    flagged = ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in c["flags"].items())
    lines = [
        f"# {c['dataset']}",
        "",
        f"Version `{c['digest'][:12]}`: {c['items']} items, answered by up to "
        f"{c['respondents']} respondents (model x prompt style x run).",
        "",
        f"- **Difficulty** (share of respondents right per item): median {share(d['median'])}, "
        f"quartiles {share(d['q1'])} to {share(d['q3'])}.",
        f"- **Flagged items**: {flagged or 'none'}.",
        *(f"- {note[0].upper()}{note[1:]}." for note in c["notes"]),
        "",
        "Figures: " + ", ".join(f"[{Path(f).stem.replace('_', ' ')}]({f})" for f in c["figures"]),
        "",
    ]
    return "\n".join(lines)


def file_name(dataset: str) -> str:
    """A dataset's name as a file name (anything but letters, digits, ``.-_`` as ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", dataset) or "_"


def write_cards(
    datasets: pd.DataFrame, summary: dict, figures: list[str], folder: str | Path
) -> list[Path]:
    """A card (``<dataset>.json`` and ``.md``) per dataset version of the run itself (``ours`` in
    ``summary``, :func:`lib.items.quality.write`'s) under ``folder``; returns the Markdown paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = datasets.set_index(["dataset", "digest"], drop=False)
    written = []
    for entry in summary["datasets"]:
        if not entry["ours"]:
            continue
        c = card(
            rows.loc[(entry["dataset"], entry["digest"])], entry["said"], summary["flags"], figures
        )
        write_json(folder / f"{file_name(c['dataset'])}.json", c)
        with atomic_file(folder / f"{file_name(c['dataset'])}.md", "w", encoding="utf-8") as f:
            f.write(markdown(c))
        written.append(folder / f"{file_name(c['dataset'])}.md")
    return written
