"""Evaluation benchmark (``make bench``): writes outputs/bench/evaluation.json.

- ``rescore_speedup``: a finished evaluation (tiny LLaVA, zero-shot + CoT, the demo datasets and a
  small Scrapbook set, fresh call cache) vs rescoring its stored outputs (median of 3), no model.
- ``text_metrics_10k_seconds``: BLEU + ROUGE-L + METEOR + ANLS over 10,000 prediction/reference
  pairs (sentences of lib/data/tiny_corpus.txt and Scrapbook questions), with each metric's share.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.records import host_state, record
from lib.core.paths import DATA
from lib.families.scrapbook import ScrapbookParams, generate
from lib.metrics import text
from lib.models.store import CallStore
from lib.stages.evaluate import EvalConfig, rescore_folder, run
from lib.stages.setup import demo_datasets

N_PAIRS = 10_000
# rescoring stored outputs is the point of keeping them: a changed metric or parser is seen at a tenth
# of the cost of evaluating again at most (19.5x when the target was set)
TARGETS = {"rescore_speedup": ">= 10"}


def _pairs(n: int, seed: int = 0) -> tuple[list[str], list[list[str]]]:
    lines = [t.strip() for t in (DATA / "tiny_corpus.txt").read_text().splitlines() if t.strip()]
    rng = np.random.default_rng(seed)
    preds = [lines[i] for i in rng.integers(0, len(lines), n)]
    refs = [[lines[i] for i in rng.integers(0, len(lines), 3)] for _ in range(n)]
    return preds, refs


def text_metrics(n: int = N_PAIRS) -> dict:
    preds, refs = _pairs(n)
    text.meteor(preds[:2], refs[:2])  # WordNet load, once per process, outside the timing
    seconds = {}
    for name in ("bleu", "rouge_l", "meteor", "anls"):
        start = time.perf_counter()
        getattr(text, name)(preds, refs)
        seconds[name] = round(time.perf_counter() - start, 2)
    return {
        "text_metrics_10k_seconds": round(sum(seconds.values()), 2),
        "per_metric_seconds": seconds,
        "pairs": n,
        "references_per_pair": 3,
    }


def rescore(tmp: Path) -> dict:
    datasets = {k: str(v) for k, v in demo_datasets(tmp / "data").items()}
    generate(
        ScrapbookParams.from_dict(
            {
                "canvas": [168, 168],
                "size_start": 40,
                "size_step": 5,
                "n_sets": 1,
                "n_backgrounds": 1,
                "n_arrangements": 2,
                "n_region_pairs": 2,
                "objects_per_image": 3,
                "n_questions_per_type": 1,
                "types": ["presence", "counting"],
                "groups": ["np", "abs"],
            }
        ),
        tmp / "scrapbook",
        progress=False,
    )
    datasets["scrapbook"] = str(tmp / "scrapbook")
    cfg = EvalConfig(
        datasets=datasets,
        models={"tiny": {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}},
        styles=["zero_shot", "cot"],
        max_new_tokens=8,
        cot_max_new_tokens=24,
        max_items=400,
    )
    start = time.perf_counter()
    summary = run(cfg, tmp / "out", store=CallStore(tmp / "calls.sqlite"), progress=False)
    run_s = time.perf_counter() - start
    times = []
    for _ in range(3):
        start = time.perf_counter()
        rescore_folder(tmp / "out")
        times.append(time.perf_counter() - start)
    med = statistics.median(times)
    return {
        "rescore_speedup": round(run_s / med, 1),
        "evaluation_seconds": round(run_s, 1),
        "rescore_seconds_median": round(med, 2),
        "rescore_seconds": [round(t, 2) for t in times],
        "predictions": summary["predictions"],
    }


def main() -> dict:
    before = host_state()
    with tempfile.TemporaryDirectory() as tmp:
        result = {**rescore(Path(tmp)), **text_metrics()}
    return record("evaluation", result, before, TARGETS)


if __name__ == "__main__":
    main()
