"""Publishing measured numbers where the documentation reads them (``outputs/`` is git-ignored).

    python -m benchmarks.publish                          # outputs/bench/*.json -> benchmarks/records/
    python -m benchmarks.publish --allow-dirty            # the same, records of an uncommitted tree marked so
    python -m benchmarks.publish reproduction unique_all  # outputs/<run>/*/paper.csv -> docs/records/reproduction.json

``make bench`` runs the first after the benchmarks. A record keeps what its benchmark wrote, its
``commit`` included (HEAD when it was measured, not when it is published). A record is refused -
none of the records is published, and the error names each file - when it has no commit (written
outside git, or before records carried one), when it states no targets or its ``meets_targets`` is
not what its figures and targets give (:func:`benchmarks.records.meets`), when it misses a target that its
``known_misses`` gives no reason for, when it was measured under load where the published record was
measured on an idle machine, and when it was measured on a tree with uncommitted changes
(``commit.dirty``): its figures are then no commit's. ``--allow-dirty`` publishes the last kind
anyway, marked ``dirty: true``, which the performance page shows. A record
of a benchmark that was skipped (it measured nothing) states its targets and carries no verdict.

The second reads the ``paper.csv`` every stage of a run wrote (the paper's value beside ours, from
``lib/data/papers.yaml`` and the stages' own tables) with the stage's provenance (date, commit,
profile) and replaces the published rows of the papers it has. The documentation's performance
and reproduction pages are rendered from these files when they are built (``scripts/docs_pages.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from benchmarks.records import RECORDS, REPRODUCTION, TargetError, meets, unexplained_misses
from lib.core.paths import ROOT, outputs_root
from lib.io import artifacts, write_json


def refusal(rec: dict, allow_dirty: bool = False) -> str | None:
    """Why a benchmark record may not be published, or None when it may (the module docstring's rules)."""
    commit = rec.get("commit")
    if not isinstance(commit, dict) or not commit.get("sha"):
        return (
            "no commit recorded: it was written outside git or before records carried one; measure it again "
            "(make bench) in a git checkout"
        )
    if "skipped" in rec:  # nothing measured: no verdict to check (_record.record writes none)
        if not rec.get("targets") or "meets_targets" in rec:
            return "a skipped benchmark's record states its targets and no meets_targets; run the benchmark again"
        verdict = None
    else:
        try:
            verdict = meets(rec)
        except TargetError as e:
            return f"{e}; measure it again with the benchmark as it is now"
    if verdict is not None and rec.get("meets_targets") is not verdict:
        return (
            f"meets_targets is {json.dumps(rec.get('meets_targets'))} but its figures and targets give "
            f"{json.dumps(verdict)}: the record was edited after it was written; measure it again"
        )
    if verdict is False:
        try:
            missed = unexplained_misses(rec)
        except TargetError as e:
            return str(e)
        if missed:
            return (
                f"misses its target(s) {', '.join(missed)}: measure again on an idle machine, or state why under "
                f"known_misses (figure -> reason) if the promise cannot be kept"
            )
    if commit.get("dirty") and not allow_dirty:
        return (
            f"measured on a tree with uncommitted changes (commit {commit['sha'][:10]} plus edits): commit, then "
            f"measure again, or publish it marked as such with --allow-dirty"
        )
    return None


def busy_over_idle(rec: dict, published: Path) -> str | None:
    """Why ``rec`` may not replace the record at ``published``: it was measured under load and the
    published one on an idle machine (a busy machine's timings would overwrite better evidence)."""
    if not published.exists() or not (rec.get("load") or {}).get("under_load"):
        return None
    old = json.loads(published.read_text())
    if (old.get("load") or {}).get("under_load") is False:
        return (
            f"measured under load, and {published.name} was measured on an idle machine: measure again when the "
            f"machine is idle (the record's load block says how busy it was)"
        )
    return None


def publish_bench(
    source: Path | None = None, target: Path = RECORDS, allow_dirty: bool = False
) -> list[Path]:
    """Copy every benchmark record of ``source`` (default ``outputs/bench``) into ``target``, all or none:
    any record :func:`refusal` refuses stops the whole publication, every refused file named."""
    source = source or outputs_root() / "bench"
    records, refused = {}, []
    for path in sorted(source.glob("*.json")):
        rec = json.loads(path.read_text())
        rec.setdefault("benchmark", path.stem)
        why = refusal(rec, allow_dirty) or busy_over_idle(rec, target / path.name)
        if why:
            refused.append(f"{path}: {why}")
        records[path.name] = rec
    if refused:
        raise SystemExit("not published (nothing was):\n" + "\n".join(refused))
    written = []
    for name, rec in records.items():
        if rec["commit"].get("dirty"):  # only with allow_dirty: refusal() stops the rest
            items = [(k, v) for k, v in rec.items() if k != "dirty"]
            at = [k for k, _ in items].index("commit") + 1
            rec = dict(
                items[:at] + [("dirty", True)] + items[at:]
            )  # the mark beside the commit it qualifies
        write_json(target / name, rec)
        written.append(target / name)
    return written


def _value(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v.item() if hasattr(v, "item") else v


def reproduction_entries(run: str) -> dict[str, dict]:
    """Paper -> its rows from every ``paper.csv`` of ``outputs/<run>/``, with the stage's provenance."""
    folder = outputs_root() / run
    out: dict[str, dict] = {}
    for stage in artifacts.STAGES:
        csv = artifacts.stage_folder(folder, stage) / artifacts.PAPER
        if not csv.exists():
            continue
        prov = artifacts.read_json(folder, stage, artifacts.PROVENANCE) or {}
        table = pd.read_csv(csv, dtype=object, keep_default_na=False)
        for paper, rows in table.groupby("paper", sort=False):
            records = []
            for r in rows.to_dict("records"):
                num = {
                    k: _value(pd.to_numeric(r[k], errors="coerce")) if r[k] != "" else None
                    for k in ("paper_value", "ours")
                }
                records.append(
                    {
                        "quantity": r["quantity"],
                        **num,
                        "equal": {"True": True, "False": False}.get(r["equal"]),
                        "note": r["note"] or "",
                    }
                )
            out[paper] = {
                "run": run,
                "stage": stage,
                "profile": prov.get("profile"),
                "command": rows["command"].iloc[0],
                "date": prov.get("created"),
                "commit": prov.get("git"),
                "machine": prov.get("platform"),
                "rows": records,
            }
    return out


def publish_reproduction(runs: list[str], target: Path = REPRODUCTION) -> dict:
    record = json.loads(target.read_text()) if target.exists() else {"papers": {}}
    found = {}
    for run in runs:
        entries = reproduction_entries(run)
        if not entries:
            raise SystemExit(
                f"outputs/{run}/ has no paper.csv in any stage: run the command the reproduction page "
                f"names for the paper first (e.g. make run PROFILE=unique_all)"
            )
        found.update(entries)
    record["papers"].update(found)
    record["about"] = (
        "The papers' numbers (lib/data/papers.yaml, lib/families/scrapbook/paper.py) beside a run's, as its "
        "stages wrote them to paper.csv; written by python -m benchmarks.publish reproduction <run>"
    )
    write_json(target, record)
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.publish", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("what", nargs="?", default="bench", choices=("bench", "reproduction"))
    ap.add_argument(
        "runs",
        nargs="*",
        help="reproduction: the runs (outputs/<run>/) whose paper.csv files to publish",
    )
    ap.add_argument(
        "--allow-dirty",
        action="store_true",
        help="bench: publish records measured on a tree with uncommitted changes, marked dirty: true",
    )
    args = ap.parse_args(argv)
    if args.what == "bench":
        written = publish_bench(allow_dirty=args.allow_dirty)
        print(
            "\n".join(f"-> {p.relative_to(ROOT)}" for p in written)
            or "no records in outputs/bench/: run make bench"
        )
    else:
        if not args.runs:
            ap.error("name the run(s), e.g. python -m benchmarks.publish reproduction unique_all")
        for paper, entry in publish_reproduction(args.runs).items():
            print(
                f"{paper}: {len(entry['rows'])} rows from outputs/{entry['run']}/{entry['stage']} -> "
                f"{REPRODUCTION.relative_to(ROOT)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
