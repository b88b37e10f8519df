"""``python -m lib.items``: the item bank made from runs, and what it says about each dataset.

    python -m lib.items build --runs RUN [RUN ...] --bank PATH
    python -m lib.items append --run RUN --bank PATH
    python -m lib.items report --bank PATH [--items CSV]
    python -m lib.items review --run RUN --out DIR [--flag F ...] [--limit N] [--seed S]
    python -m lib.items apply --export FILE --dataset DIR --out DIR

A RUN is a run folder, its ``06_evaluate`` folder, or a run name of the outputs root. ``build``
writes the bank of exactly these runs (the file at PATH replaced whole); ``append`` adds one run's
answers to it, replacing the rows that run had. ``report`` prints per dataset version its items,
respondents and flagged items (:mod:`lib.items.classical`), the 2PL fit's status
(:mod:`lib.items.irt`: fitted, with how many items it finds reversed, or why not) and the subset
check's (:mod:`lib.items.subsets`: its error beside random subsets', or why not); ``--items``
writes every item's statistics, flags and 2PL parameters as CSV. ``review`` writes the Label Studio
project reviewing a run's flagged items (stage 07's tables), ``apply`` the new dataset version its
export's verdicts make, with its changelog (:mod:`lib.items.review`). Exits 0; 2 with
``error: ...`` when a run, the bank, a dataset or an export cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from lib.io import NotOurFolder, write_csv
from lib.items import bank, classical, irt, review, subsets


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
    asked = commands.add_parser("review", help="a Label Studio project of a run's flagged items")
    asked.add_argument("--run", required=True, help="a run name or folder (after stage 07)")
    asked.add_argument(
        "--out", required=True, help="the project's folder (new, empty or a review's)"
    )
    asked.add_argument("--flag", action="append", default=[], help="only items carrying it")
    asked.add_argument("--limit", type=_positive, help="review at most this many items (a sample)")
    asked.add_argument("--seed", type=int, default=0, help="the sample's shuffle seed")
    applied = commands.add_parser(
        "apply", help="a review export's verdicts as a new dataset version"
    )
    applied.add_argument("--export", required=True, help="Label Studio's JSON export of the review")
    applied.add_argument("--dataset", required=True, help="the dataset folder it reviewed")
    applied.add_argument("--out", required=True, help="the new version's folder (new or empty)")
    return ap


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a whole number > 0")
    return int(text)


def _reviewed(args) -> int:
    """The ``review`` and ``apply`` commands: what they wrote, as JSON."""
    try:
        if args.command == "review":
            flags = tuple(args.flag)
            said = review.review_project(args.run, args.out, flags, args.limit, args.seed)
        else:
            said = review.apply_review(args.export, args.dataset, args.out)
            said = {k: v for k, v in said.items() if k != "changes"}
    except (review.ReviewError, bank.BankError, NotOurFolder, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(said, indent=1))
    return 0


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
    if args.command in ("review", "apply"):
        return _reviewed(args)
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
