"""Which score agrees with people (``make bench``): writes outputs/bench/agreement.json.

YesBut's human evaluation (``../shared/data/yesbut/Human_Eval_Results.csv``: 150 descriptions five
VLMs wrote of 30 two-panel images, each judged by people on correctness, appropriate length, visual
completeness and faithfulness, the person's own description as the reference) scored by every text
metric of ``yesbut.understanding`` and by every declared judge (LAVE, the yes/no verdict) on the demo
profile's judge model (SmolLM2-135M), through ``python -m lib.agreement``: per scorer and criterion,
ROC AUC and Kendall tau-b (kappa and alpha for a judge) with intervals over the 30 images, the best
scorer against each other, and each judge's checks. The values are findings, not promises (a weak small judge is a finding), so the targets
only say the measurement is whole: every answer and image read, six scorers, every figure with an
interval. The judge's calls go through the call store: a second run asks no model.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pandas as pd

from benchmarks.records import host_state, record
from lib.agreement import scorers as agreement
from lib.core.paths import ROOT

LABELS = ROOT.parent / "shared" / "data" / "yesbut" / "Human_Eval_Results.csv"
PROFILE = "demo"  # its stage-06 judge (SmolLM2) and yesbut.understanding's five text metrics
TARGETS = {
    "answers": "== 150",
    "clusters": "== 30",
    "n_scorers": ">= 6",
    "every_figure_has_an_interval": "== true",
}


def _rows(frame: pd.DataFrame) -> list[dict]:
    return [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in frame.to_dict("records")
    ]


def main() -> dict:
    before = host_state()
    if not LABELS.exists():
        return record("agreement", {"skipped": f"{LABELS} is absent"}, before, TARGETS)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "agreement"
        summary = agreement.run(LABELS, out, PROFILE)
        table = pd.read_csv(out / "agreement.csv")
        paired = pd.read_csv(out / "paired.csv")
        checks = pd.read_csv(out / "judge_checks.csv")
    defined = table[table["value"].notna()]
    result = {
        "labels": str(LABELS.relative_to(ROOT.parent)),
        "profile": PROFILE,
        "answers": summary["answers"],
        "clusters": summary["clusters"],
        "n_scorers": len(summary["scorers"]),
        "scorers": summary["scorers"],
        "every_figure_has_an_interval": bool(
            len(defined) and defined[["ci_low", "ci_high"]].notna().all().all()
        ),
        "correctness": _rows(table[table["criterion"] == "correctness"]),
        "other_criteria": _rows(table[table["criterion"] != "correctness"]),
        "paired": _rows(paired),
        "judge_checks": _rows(checks),
    }
    return record("agreement", result, before, TARGETS)


if __name__ == "__main__":
    main()
