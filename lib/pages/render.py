"""The one way data goes into a page: Jinja2 templates under ``lib/data/templates/``, autoescaped.

    write_page(path, "report.html", run=..., ...)   # rendered, then written whole or not at all
    table(frame, "caption", csv="07_analyze/x.csv")  # a frame as the templates' table macro shows it

Datasets come from other people (imported CSVs, hub datasets, paper releases) and answers from
models, so any text of a run may be hostile. A page takes it only as a template's variable:

- in text and quoted attributes autoescape writes ``& < > " '`` as entities (a value is never read
  as a template either: ``{{ }}`` in data stays text);
- data for a script goes in ``<script type="application/json">`` through Jinja's ``tojson``
  (``< > & '`` as ``\\u003c``... and, ASCII only, U+2028/9 as ``\\u2028``: still JSON, so
  ``JSON.parse`` reads back the same value, and a ``</script>`` in the data cannot close the block);
- links are relative paths the pages build (the run's files, ``browser/index.html#...``), never a
  text of the run.

Every page extends ``page.html``, whose Content-Security-Policy is the second wall: its scripts come
only from files beside it (``{% set scripts = true %}``; never inline, never an ``on...=``
attribute), so an escape missed somewhere still cannot run. Scripts build their DOM with
``textContent``, never ``innerHTML``.
"""

from __future__ import annotations

from itertools import groupby
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from lib.core.paths import DATA
from lib.io import atomic_file

ENV = Environment(
    loader=FileSystemLoader(DATA / "templates"),
    autoescape=True,
    undefined=StrictUndefined,  # a name the page lacks fails the build, never an empty cell
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TOP_ROWS = 10  # a long table shows this many rows and links its CSV


class Link(NamedTuple):
    """A table cell that opens another page (a path the pages build, relative to the page)."""

    href: str
    text: str


def write_page(path: Path, template: str, **context) -> Path:
    """Render ``template`` with ``context`` into ``path``; a stopped build leaves the previous page whole."""
    page = ENV.get_template(template).render(**context)
    with atomic_file(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


def _cell(value):
    """A value as a cell shows it: a number to 3 decimals (a count as it is), a missing one empty."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    return f"{value:.3f}" if isinstance(value, float) else value


def _header(columns: pd.Index) -> list[list[tuple[str, int]]]:
    """The header rows, one per level of ``columns``: each label with how many columns it spans
    (an upper level's label spans its run of columns, as pandas shows a MultiIndex)."""
    levels = [list(columns.get_level_values(i)) for i in range(columns.nlevels)]
    upper = [
        [(label, len(list(run))) for (*_, label), run in groupby(zip(*levels[: i + 1]))]
        for i in range(columns.nlevels - 1)
    ]
    return upper + [[(label, 1) for label in levels[-1]]]


def table(
    df: pd.DataFrame, title: str = "", max_rows: int = TOP_ROWS, index: bool = True, csv: str = ""
) -> dict:
    """``df`` as the templates' ``table`` macro (``tables.html``) shows it: counts as integers, other
    numbers to 3 decimals, a cell a :class:`Link` or text; a tidy frame without its row numbers
    (``index=False``). A longer table shows its top ``max_rows`` and links its ``csv`` (a path
    relative to the page)."""
    shown = df.head(max_rows).copy()
    for col in shown.columns:
        values = shown[col]
        if (
            values.dtype.kind == "f"
            and values.notna().any()
            and (values.dropna() % 1 == 0).all()
            and (values.dropna().abs() > 1).any()
        ):
            shown[col] = values.astype("Int64")  # a column of counts, not 12.000
    if index:
        shown = shown.reset_index(names=[name or "" for name in shown.index.names])
    return {
        "title": title,
        "header": _header(shown.columns),
        "index": df.index.nlevels if index else 0,  # the first cells of a row head it
        "rows": [[_cell(v) for v in row] for row in shown.itertuples(index=False)],
        "total": len(df),
        "csv": csv,
    }
