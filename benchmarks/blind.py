"""How much of MemeQA is answered without its images (``make bench``): writes
outputs/bench/blind.json.

On the released training splits (``../shared/data/memeqa``, None- and None+), the single-answer
questions are read by :func:`lib.items.blind.blind_reader` (the linear reader, five folds grouped
by meme) and by the rule-based blind baseline of :mod:`lib.metrics.shortcuts`; per split and per
question type, each one's accuracy with its interval resampling memes, beside chance, and the
seconds the reader took.

The targets say the reader answers about three quarters of None- and two thirds of None+ blind,
and leaves the rule-based tells far behind on both: a benchmark builder's audit that only looked
for the tells someone thought of would miss most of what a text-only reader finds.
"""

from __future__ import annotations

import time

from benchmarks.records import host_state, record
from lib.core.paths import ROOT
from lib.families.memeqa.importer import import_memeqa
from lib.items.blind import blind_reader, blind_table

MEMEQA = ROOT.parent / "shared" / "data" / "memeqa"
SPLITS = {"none_minus": "none-minus", "none_plus": "none-plus"}
TARGETS = {
    "none_minus.reader": ">= 0.72",
    "none_minus.margin_over_rules": ">= 0.12",
    "none_plus.reader": ">= 0.62",
    "none_plus.margin_over_rules": ">= 0.30",
}
FIGURES = ("n", "images", "blind", "blind_low", "blind_high", "chance")
FIGURES += ("rule_based", "rule_low", "rule_high")


def measure(split: str) -> dict:
    """One split's single-answer training questions read blind: overall and per question type."""
    items = import_memeqa(MEMEQA / split / "train.json")
    single = [it for it in items if it.meta["general_type"] == "single"]
    start = time.perf_counter()
    scored = blind_reader(single, dataset=split)
    seconds = time.perf_counter() - start
    table = blind_table(scored).set_index("type")
    whole = table.loc["all types"]
    return {
        "questions": len(single),
        "reader": round(float(whole["blind"]), 4),
        "rule_based": round(float(whole["rule_based"]), 4),
        "chance": round(float(whole["chance"]), 4),
        "margin_over_rules": round(float(whole["blind"] - whole["rule_based"]), 4),
        "reader_seconds": round(seconds, 2),
        "by_type": {
            qtype: {k: round(float(row[k]), 4) for k in FIGURES} for qtype, row in table.iterrows()
        },
    }


def main() -> dict:
    before = host_state()
    if not MEMEQA.exists():
        return record("blind", {"skipped": f"{MEMEQA} is absent"}, before, TARGETS)
    result = {name: measure(split) for name, split in SPLITS.items()}
    return record("blind", result, before, TARGETS)


if __name__ == "__main__":
    main()
