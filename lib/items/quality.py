"""Item quality of a run, as stage 07 shows it: which of its datasets' items are good.

    found = assess(gather([run_06_folder, other_06_folder]))   # the bank, then every audit
    write(found, run_folder / "07_analyze" / "items")           # the tables and summary.json

:func:`gather` pools the answers of the runs named (the run's own stage 06, and the runs stage 07
compares it with): each stage 06 wrote its answers as bank rows (``06_evaluate/items.parquet``,
:mod:`lib.items.bank`); a run of older code is read from its predictions. :func:`assess` then
runs each audit of :data:`AUDITS` over the bank and puts what they found together.

**An audit is one function** ``audit(bank) -> Finding`` (:class:`Finding`): per item its columns
(``item_stats.csv``) and the flags it raises (``flags.csv``, the item browser's ``flag`` filter,
the report's flagged items), per dataset version its columns (``datasets.csv``) and a sentence
for the page and the card (``not enough respondents (n = 4 < 20) for a 2PL fit`` is a sentence,
not an error), tables of its own (``<name>.csv``) and figures (``figures/<name>``). The
classical statistics (:func:`classical`), the 2PL fit (:func:`irt_fit`), the subset check
(:func:`subset_check`), the blind reader and the image leaks (:func:`lib.items.audits.blind`,
:func:`lib.items.audits.leaks`) are today's; a further audit is one more such function added to
:data:`AUDITS`, and its flags, tables, figures and sentences reach the tables, the report, the
browser and the cards with no other change. The bank's
``source`` column names each answer's evaluation folder, whose ``config.json`` names the datasets'
folders: an audit that reads the items' text or images starts there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lib.io import artifacts, write_csv, write_json
from lib.items import audits, irt, subsets
from lib.items import bank as bank_rows
from lib.items import classical as stats_of
from lib.items.bank import ITEM, BankError
from lib.items.figures import distributions
from lib.items.finding import DATASET, Audit, Finding

SUMMARY = "summary.json"  # under 07_analyze/items/: the runs pooled, each dataset's sentences


def _counted(n: int, least: int) -> str:
    return f"not enough respondents (n = {n} < {least})"


def _classical_said(row: pd.Series) -> str:
    """What the classical statistics can flag in a dataset version with this many respondents."""
    n = int(row["respondents"])
    if n < stats_of.MIN_RESPONDENTS:
        return f"flags: {_counted(n, stats_of.MIN_RESPONDENTS)} to flag any item"
    if n < stats_of.MIN_DISCRIMINATION_RESPONDENTS:
        least = stats_of.MIN_DISCRIMINATION_RESPONDENTS
        return f"negative discrimination: {_counted(n, least)} to flag it"
    return f"every flag computed over up to {n} respondents"


def classical(bank: pd.DataFrame) -> Finding:
    """Share right, corrected point-biserial discrimination, the most common wrong answer and the
    four flags (:mod:`lib.items.classical`); figures of difficulty and, where computed, of
    discrimination across each dataset's items."""
    stats = stats_of.item_statistics(bank).set_index(list(ITEM))
    counts = stats_of.flag_counts(stats.reset_index()).set_index(DATASET)
    by_dataset = stats.groupby(level="dataset")
    figures = {
        "item_difficulty": distributions(
            {d: s["p"] for d, s in by_dataset},
            "Item difficulty: share of respondents right, per dataset",
            "share right (0: no one, 1: every respondent)",
            (0.0, 1.0),
        )
    }
    found = {d: s["discrimination"].dropna() for d, s in by_dataset}
    if any(len(v) for v in found.values()):
        figures["item_discrimination"] = distributions(
            {d: v for d, v in found.items() if len(v)},
            "Item discrimination: corrected point-biserial, per dataset",
            "correlation with the respondents' other answers",
            (-1.0, 1.0),
        )
    columns = ["task", "n", "p", "discrimination", "wrong_answer", "wrong_share"]
    return Finding(
        "classical",
        items=stats[columns],
        flags=stats[list(stats_of.FLAGS)],
        datasets=counts[["items", "respondents"]].join(by_dataset_p(stats)),
        said={k: _classical_said(row) for k, row in counts.iterrows()},
        figures=figures,
    )


def by_dataset_p(stats: pd.DataFrame) -> pd.DataFrame:
    """Per dataset version: the median and quartiles of its items' share right."""
    p = stats.groupby(level=DATASET)["p"]
    return pd.DataFrame(
        {"p_q1": p.quantile(0.25), "p_median": p.median(), "p_q3": p.quantile(0.75)}
    )


def irt_fit(bank: pd.DataFrame) -> Finding:
    """The 2PL fit per dataset version (:mod:`lib.items.irt`): its status, and where fitted every
    item's a, b and their standard errors (``irt.csv``) and a figure of the difficulties."""
    fits = irt.fit(bank)
    table = irt.summary(fits).set_index(DATASET)
    params = irt.item_parameters(fits)
    said = {
        k: f"2PL fitted on {r['irt_respondents']} respondents: {r['reversed']} items with a < 0"
        + ("" if r["irt_converged"] else " (the fit did not converge)")
        if r["irt"] == "fitted"
        else f"2PL: {r['irt_reason']}"
        for k, r in table.iterrows()
    }
    found = Finding("irt", datasets=table[["irt", "irt_respondents", "reversed"]], said=said)
    if len(params):
        found.items = params.set_index(list(ITEM))
        found.tables["irt"] = params
        found.figures["irt_difficulty"] = distributions(
            {d: part["b"] for d, part in params.groupby("dataset")},
            "2PL difficulty b, per dataset",
            "b (logits: the ability at which half are right)",
        )
    return found


def subset_check(bank: pd.DataFrame) -> Finding:
    """A tenth of each dataset's items that keeps the ranking, checked by leaving each respondent
    out (:mod:`lib.items.subsets`), or why not."""
    table = subsets.summary(subsets.check_bank(bank)).set_index(DATASET)
    said = {
        k: f"a subset of {r['subset_size']} items estimates a left-out respondent's accuracy within "
        f"{r['subset_mae']:.3f} on average (random subsets: {r['random_mae']:.3f}; rank "
        f"correlation {r['subset_spearman']:.2f})"
        if r["subset"] == "checked"
        else f"subset: {r['subset_reason']}"
        for k, r in table.iterrows()
    }
    return Finding("subsets", datasets=table[["subset", "subset_size", "subset_mae"]], said=said)


# the audits stage 07 runs, in order; a further audit is one more function here
AUDITS: tuple[Audit, ...] = (classical, irt_fit, subset_check, audits.blind, audits.leaks)


@dataclass
class Quality:
    """Every audit's findings over one bank, put together (:func:`assess`)."""

    runs: list[str]
    findings: list[Finding]

    def _joined(self, part: str, index: list[str]) -> pd.DataFrame:
        frames = [getattr(f, part) for f in self.findings if getattr(f, part) is not None]
        if not frames:
            return pd.DataFrame(index=pd.MultiIndex.from_tuples([], names=index))
        return pd.concat(frames, axis=1, join="outer")

    @property
    def flag_names(self) -> list[str]:
        return [c for f in self.findings if f.flags is not None for c in f.flags.columns]

    def flags(self) -> pd.DataFrame:
        """Per item (:data:`ITEM`, as columns) its task and every flag, 0 or 1."""
        flags = self._joined("flags", list(ITEM)).fillna(False).astype(int)
        task = self._joined("items", list(ITEM))["task"]
        return flags.join(task).reset_index()[[*ITEM, "task", *self.flag_names]]

    def items(self) -> pd.DataFrame:
        """Per item every audit's columns, then its flags (``item_stats.csv``)."""
        table = self._joined("items", list(ITEM))
        flags = self.flags().set_index(list(ITEM))[self.flag_names]
        return table.join(flags).reset_index()

    def datasets(self) -> pd.DataFrame:
        """Per dataset version every audit's columns and how many items carry each flag."""
        table = self._joined("datasets", DATASET)
        counts = self.flags().groupby(DATASET)[self.flag_names].sum()
        return table.join(counts).fillna({f: 0 for f in self.flag_names}).reset_index()

    def said(self) -> dict[tuple[str, str], list[str]]:
        """Per dataset version, each audit's sentence in the audits' order."""
        out: dict[tuple[str, str], list[str]] = {}
        for f in self.findings:
            for key, text in f.said.items():
                out.setdefault(key, []).append(text)
        return out

    @property
    def figures(self) -> dict[str, tuple]:
        return {name: fig for f in self.findings for name, fig in f.figures.items()}

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {name: t for f in self.findings for name, t in f.tables.items()}


def flagged_counts(found: Quality) -> dict[str, int]:
    """How many items carry each flag, over every dataset version."""
    return {k: int(v) for k, v in found.flags()[found.flag_names].sum().items()}


def run_bank(folder: str | Path) -> pd.DataFrame:
    """One run's answers as bank rows: those its stage 06 wrote (refused when stale:
    :func:`lib.io.artifacts.item_bank_file`), else read from its predictions (older runs)."""
    folder = bank_rows.evaluation_folder(folder)
    path = artifacts.item_bank_file(folder)
    return bank_rows.read(path) if path else bank_rows.run_answers(folder, verdicts=False)


def gather(folders: Iterable[str | Path]) -> pd.DataFrame:
    """The bank of these runs' stage 06 (:func:`run_bank` each); a run named twice is refused."""
    frames = [run_bank(f) for f in folders]
    runs = [r for frame in frames for r in frame["run"].unique()]
    if len(set(runs)) < len(runs):
        raise BankError(f"a run is given twice ({', '.join(runs)}): name each run once")
    if not frames:
        raise BankError("no runs given: name at least one run's 06_evaluate folder")
    return pd.concat(frames, ignore_index=True)


def assess(bank: pd.DataFrame, audits: Iterable[Audit] = AUDITS) -> Quality:
    """Every audit of ``audits`` over the bank (see the module's docstring)."""
    return Quality(sorted(bank["run"].unique()), [audit(bank) for audit in audits])


def write(found: Quality, folder: str | Path, ours: Iterable[tuple[str, str]] = ()) -> dict:
    """``item_stats.csv``, ``flags.csv`` (the flagged items only), ``datasets.csv``, each audit's
    tables and :data:`SUMMARY` (the runs, the flags, each dataset version's sentences; ``ours``:
    the dataset versions of the run whose stage 07 this is) under ``folder``; returns the summary.
    Figures are the caller's to save (``figures/``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    flags = found.flags()
    write_csv(folder / Path(artifacts.ITEM_STATS).name, found.items())
    write_csv(folder / Path(artifacts.ITEM_FLAGS).name, flags[flags[found.flag_names].any(axis=1)])
    write_csv(folder / Path(artifacts.ITEM_DATASETS).name, found.datasets())
    for name, table in found.tables.items():
        write_csv(folder / f"{name}.csv", table)
    ours = set(ours)
    summary = {
        "runs": found.runs,
        "flags": found.flag_names,
        "datasets": [
            {"dataset": d, "digest": g, "ours": (d, g) in ours, "said": said}
            for (d, g), said in sorted(found.said().items())
        ],
    }
    write_json(folder / SUMMARY, summary)
    return summary


def withheld(folder: str | Path, why: str) -> dict:
    """The section's summary when the bank cannot be read (stale answers, a run that is no run):
    why, written as :data:`SUMMARY` so the report says it."""
    summary = {"runs": [], "flags": [], "datasets": [], "withheld": why}
    write_json(Path(folder) / SUMMARY, summary)
    return summary


def read_summary(run_folder: str | Path) -> dict | None:
    """The item-quality summary stage 07 wrote (:func:`write`), None where it wrote none."""
    path = artifacts.stage_folder(run_folder, artifacts.ANALYZE) / artifacts.ITEMS / SUMMARY
    return json.loads(path.read_text()) if path.exists() else None


def read_table(run_folder: str | Path, name: str) -> pd.DataFrame | None:
    """One of 07's item tables (:data:`lib.io.artifacts.ITEM_FLAGS`...), ids and answers as text
    (``NA`` is an id, not a missing value); None where absent."""
    path = artifacts.stage_folder(run_folder, artifacts.ANALYZE) / name
    if not path.exists():
        return None
    text = {c: str for c in (*ITEM, "task", "wrong_answer")}
    return pd.read_csv(path, dtype=text, keep_default_na=False, na_values=[""])
