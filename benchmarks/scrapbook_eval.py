"""Scrapbook-scale evaluation (``make bench``): writes outputs/bench/scrapbook_eval.json.

The ``unique_all`` dataset (params/04_scrapbook.unique_all.yaml, generated once into a temporary
folder), then in fresh subprocesses (each peak RSS its own): stage 06 on 2,000 and on 20,000
questions sampled from it (tiny LLaVA, zero-shot, a fresh call cache: every question is asked),
seconds and peak RSS each (one run each: the 20,000 take minutes), beside the floor of any
evaluation (a process that imports what stage 06 imports, loads the model and answers one
question); then ``rescore`` of the
20,000-question evaluation, median of 3; then every question answered by the ``constant``
baseline (no model) and that evaluation rescored (one run each: the rescore reads, scores and
writes back 827,004 predictions).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from benchmarks._record import host_state, record
from lib.paths import PARAMS

SIZES = (2_000, 20_000)
RESCORE_REPEATS = 3

CHILD = r"""
import json, sys, time
from pathlib import Path
from lib import evaluate as E
from lib.store import CallStore

def peak_rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

LLAVA = {"backend": "tiny", "name": "llava", "batch_size": 16}
mode, folder, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
start = time.perf_counter()
if mode == "floor":  # what any evaluation holds: the imports, the model, one question answered
    from lib.io import read_items_at
    from lib.models import load_model
    from lib.tasks import task_of
    item = read_items_at(folder, [0])[0]
    model = load_model(LLAVA)
    model.generate([task_of(item).request(item, Path(folder), max_new_tokens=32)])
    print(json.dumps({"seconds": time.perf_counter() - start, "predictions": 1, "peak_rss_mb": peak_rss_mb()}))
    sys.exit(0)
if mode in ("eval", "constant"):
    model = LLAVA if mode == "eval" else {"backend": "constant", "answer": "yes"}
    cfg = E.EvalConfig(datasets={"unique_all": folder}, models={mode: model}, styles=["zero_shot"],
                       max_items=int(sys.argv[4]))  # the default 1,000 bootstrap resamples
    summary = E.run(cfg, out, store=CallStore(out.parent / "calls.sqlite"), progress=False)
    n = summary["predictions"]
else:
    summary = E.rescore_folder(out)
    n = sum(1 for _ in open(out / "predictions.jsonl"))
print(json.dumps({"seconds": time.perf_counter() - start, "predictions": n, "peak_rss_mb": peak_rss_mb(),
                  "ask_seconds": summary.get("predict_seconds"), "rescore_seconds": summary.get("rescore_seconds")}))
"""


def _child(*args) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, *map(str, args)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> dict:
    before = host_state()
    from lib.scrapbook import ScrapbookParams, generate

    root = Path(tempfile.mkdtemp(prefix="vqalab-bench-unique-all-"))
    params = ScrapbookParams.from_dict(yaml.safe_load((PARAMS / "04_scrapbook.unique_all.yaml").read_text()))
    stats = generate(params, root / "unique_all", progress=False)
    size_mb = (root / "unique_all" / "items.jsonl").stat().st_size / 2**20
    floor = _child("floor", root / "unique_all", root / "floor")
    runs = {n: _child("eval", root / "unique_all", root / f"eval{n}" / "06_evaluate", n) for n in SIZES}
    rescores = [_child("rescore", root / "unique_all", root / f"eval{SIZES[-1]}" / "06_evaluate")
                for _ in range(RESCORE_REPEATS)]
    constant = _child("constant", root / "unique_all", root / "constant" / "06_evaluate", 0)
    full = _child("rescore", root / "unique_all", root / "constant" / "06_evaluate")
    result = {
        "dataset": {"questions": stats["questions"], "images": stats["images"], "items_jsonl_mb": round(size_mb)},
        # seconds: the whole stage; sampling: the rest of it besides asking and rescoring, almost all
        # the pass over every line that draws the sample (the same for any sample size); asking, per
        # question: answering, less the floor's seconds (importing torch, loading the model, one question)
        "evaluate": {str(n): {"predictions": r["predictions"], "seconds": round(r["seconds"], 1),
                              "ms_per_question": round(1000 * r["seconds"] / r["predictions"], 2),
                              "sampling_seconds": round(r["seconds"] - r["ask_seconds"] - r["rescore_seconds"], 1),
                              "ask_ms_per_question": round(1000 * (r["ask_seconds"] - floor["seconds"])
                                                           / r["predictions"], 2),
                              "rescore_seconds": round(r["rescore_seconds"], 2),
                              "peak_rss_mb": round(r["peak_rss_mb"]),
                              "above_floor_mb": round(r["peak_rss_mb"] - floor["peak_rss_mb"])} for n, r in runs.items()},
        # torch, transformers (which imports sympy and scipy), pandas, the tiny LLaVA, one question
        "floor_peak_rss_mb": round(floor["peak_rss_mb"]), "floor_seconds": round(floor["seconds"], 1),
        "rescore_20000": {"seconds": round(statistics.median(r["seconds"] for r in rescores), 2),
                          "peak_rss_mb": round(max(r["peak_rss_mb"] for r in rescores)),
                          "all_seconds": [round(r["seconds"], 2) for r in rescores]},
        "constant_all": {"predictions": constant["predictions"], "evaluate_seconds": round(constant["seconds"], 1),
                         "evaluate_peak_rss_mb": round(constant["peak_rss_mb"]), "rescore_seconds": round(full["seconds"], 1),
                         "rescore_peak_rss_mb": round(full["peak_rss_mb"])},
        "targets": {"peak_rss_mb_at_most": 600, "rescore_20000_seconds_at_most": 3,
                    "rescore_all_seconds_at_most": 120, "rescore_all_peak_rss_mb_at_most": 4096},
    }
    result["meets_targets"] = (all(r["peak_rss_mb"] <= 600 for r in runs.values())
                               and result["rescore_20000"]["seconds"] <= 3 and full["seconds"] <= 120
                               and full["peak_rss_mb"] <= 4096)
    return record("scrapbook_eval", result, before)


if __name__ == "__main__":
    main()
