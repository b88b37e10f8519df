"""Publishing measured numbers where the documentation reads them (``outputs/`` is git-ignored).

    python -m benchmarks.publish                          # outputs/bench/*.json -> benchmarks/records/
    python -m benchmarks.publish reproduction unique_all  # outputs/<run>/*/paper.csv -> docs/records/reproduction.json

``make bench`` runs the first after the benchmarks. A record keeps what its benchmark wrote; one
written before records carried a date (``_record.stamp``) gets its file's modification time, marked
as such (``date_from``), and no commit. The second reads the ``paper.csv`` every stage of a run wrote
(the paper's value beside ours, from ``lib/data/papers.yaml`` and the stages' own tables) with the
stage's provenance (date, commit, profile) and replaces the published rows of the papers it has.
The documentation's performance and reproduction pages are rendered from these files when they are
built (``benchmarks/pages.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from pathlib import Path

import pandas as pd

from benchmarks.pages import RECORDS, REPRODUCTION
from lib import artifacts as A
from lib.io import write_json
from lib.paths import ROOT, outputs_root


def publish_bench(source: Path | None = None, target: Path = RECORDS) -> list[Path]:
    """Copy every benchmark record of ``source`` (default ``outputs/bench``) into ``target``."""
    source = source or outputs_root() / "bench"
    written = []
    for path in sorted(source.glob("*.json")):
        rec = json.loads(path.read_text())
        rec.setdefault("benchmark", path.stem)
        if not rec.get("date"):
            mtime = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc)
            rec["date"] = mtime.isoformat(timespec="seconds")
            rec["date_from"] = "the record file's modification time: written before records carried a date"
        rec.setdefault("commit", None)
        write_json(target / path.name, rec)
        written.append(target / path.name)
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
    for stage in A.STAGES:
        csv = A.stage_folder(folder, stage) / A.PAPER
        if not csv.exists():
            continue
        prov = A.read_json(folder, stage, A.PROVENANCE) or {}
        table = pd.read_csv(csv, dtype=object, keep_default_na=False)
        for paper, rows in table.groupby("paper", sort=False):
            records = []
            for r in rows.to_dict("records"):
                num = {k: _value(pd.to_numeric(r[k], errors="coerce")) if r[k] != "" else None
                       for k in ("paper_value", "ours")}
                records.append({"quantity": r["quantity"], **num,
                                "equal": {"True": True, "False": False}.get(r["equal"]), "note": r["note"] or ""})
            out[paper] = {"run": run, "stage": stage, "profile": prov.get("profile"), "command": rows["command"].iloc[0],
                          "date": prov.get("created"), "commit": prov.get("git"),
                          "machine": prov.get("platform"), "rows": records}
    return out


def publish_reproduction(runs: list[str], target: Path = REPRODUCTION) -> dict:
    record = json.loads(target.read_text()) if target.exists() else {"papers": {}}
    found = {}
    for run in runs:
        entries = reproduction_entries(run)
        if not entries:
            raise SystemExit(f"outputs/{run}/ has no paper.csv in any stage: run the command the reproduction page "
                             f"names for the paper first (e.g. make run PROFILE=unique_all)")
        found.update(entries)
    record["papers"].update(found)
    record["about"] = ("The papers' numbers (lib/data/papers.yaml, lib/scrapbook/paper.py) beside a run's, as its "
                       "stages wrote them to paper.csv; written by python -m benchmarks.publish reproduction <run>")
    write_json(target, record)
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.publish", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", default="bench", choices=("bench", "reproduction"))
    ap.add_argument("runs", nargs="*", help="reproduction: the runs (outputs/<run>/) whose paper.csv files to publish")
    args = ap.parse_args(argv)
    if args.what == "bench":
        written = publish_bench()
        print("\n".join(f"-> {p.relative_to(ROOT)}" for p in written) or "no records in outputs/bench/: run make bench")
    else:
        if not args.runs:
            ap.error("name the run(s), e.g. python -m benchmarks.publish reproduction unique_all")
        for paper, entry in publish_reproduction(args.runs).items():
            print(f"{paper}: {len(entry['rows'])} rows from outputs/{entry['run']}/{entry['stage']} -> "
                  f"{REPRODUCTION.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
