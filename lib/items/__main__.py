"""``python -m lib.items``: the item bank made from runs, and what it says about each dataset.

    python -m lib.items build --runs RUN [RUN ...] --bank PATH
    python -m lib.items append --run RUN --bank PATH
    python -m lib.items report --bank PATH [--items CSV]

A RUN is a run folder, its ``06_evaluate`` folder, or a run name of the outputs root. ``build``
writes the bank of exactly these runs (the file at PATH replaced whole); ``append`` adds one run's
answers to it, replacing the rows that run had. ``report`` prints per dataset version its items,
respondents and flagged items (:mod:`lib.items.classical`), the 2PL fit's status
(:mod:`lib.items.irt`: fitted, with how many items it finds reversed, or why not) and the subset
check's (:mod:`lib.items.subsets`: its error beside random subsets', or why not); ``--items``
writes every item's statistics, flags and 2PL parameters as CSV. Exits 0; 2 with ``error: ...``
when a run or the bank cannot be read.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from lib.io import write_csv
from lib.items import bank, classical, irt, subsets


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m lib.items", description=__doc__.split("\n")[0])
    commands = ap.add_subparsers(dest="command", required=True)
    made = commands.add_parser("build", help="the bank of these runs, written whole")
    made.add_argument("--runs", nargs="+", required=True, help="run folders, 06_evaluate folders")
    made.add_argument("--bank", required=True, help="the Parquet file to write")
    added = commands.add_parser("append", help="one run's answers added to the bank")
    added.add_argument("--run", required=True, help="a run folder or its 06_evaluate folder")
    added.add_argument("--bank", required=True, help="the Parquet file (made if absent)")
    shown = commands.add_parser("report", help="flags, the 2PL fit and the subset check")
    shown.add_argument("--bank", required=True, help="the bank's Parquet file")
    shown.add_argument("--items", help="write every item's statistics and parameters here (CSV)")
    return ap


def report(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per dataset version: items, respondents, flag counts, 2PL and subset status; per item:
    statistics, flags and 2PL parameters) of a bank."""
    stats = classical.item_statistics(table)
    fits = irt.fit(table)
    datasets = classical.flag_counts(stats).merge(irt.summary(fits), on=["dataset", "digest"])
    datasets = datasets.merge(subsets.summary(subsets.check_bank(table)), on=["dataset", "digest"])
    items = stats.merge(irt.item_parameters(fits), on=list(bank.ITEM), how="left")
    return datasets, items


def _said(row: pd.Series) -> str:
    """One dataset version's lines of the printed report."""
    flags = ", ".join(f"{name} {row[name]}" for name in classical.FLAGS)
    irt_line = (
        f"2PL fitted ({row['irt_respondents']} respondents; {row['reversed']} items with a < 0)"
        if row["irt"] == "fitted"
        else f"2PL: {row['irt_reason']}"
    )
    subset_line = (
        f"subset of {row['subset_size']}: mean abs error {row['subset_mae']:.3f} (random "
        f"{row['random_mae']:.3f}), rank correlation {row['subset_spearman']:.2f}"
        if row["subset"] == "checked"
        else f"subset: {row['subset_reason']}"
    )
    return (
        f"{row['dataset']} ({row['digest'][:12]}): {row['items']} items, up to "
        f"{row['respondents']} respondents\n  flagged: {flags}\n  {irt_line}\n  {subset_line}"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            table = bank.build(args.runs)
            bank.write(table, args.bank)
        elif args.command == "append":
            table = bank.append(args.bank, args.run)
        else:
            datasets, items = report(bank.read(args.bank))
            print("\n".join(_said(row) for _, row in datasets.iterrows()))
            if args.items:
                write_csv(args.items, items)
            return 0
    except (bank.BankError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    runs, items = table["run"].nunique(), table.drop_duplicates(list(bank.ITEM)).shape[0]
    print(f"{args.bank}: {len(table)} answers to {items} items from {runs} run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
