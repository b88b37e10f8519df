"""Scrapbook-scale evaluation (``make bench``): writes outputs/bench/scrapbook_eval.json.

The ``unique_all`` dataset (params/04_scrapbook.unique_all.yaml, generated once into a temporary
folder), then in fresh subprocesses (each peak RSS its own), beside the floor of any evaluation
(a process that imports what stage 06 imports, loads the tiny LLaVA and answers one question):

- three models in one evaluation of 2,000 sampled questions (zero-shot, a fresh call cache: every
  question is asked): the ``constant`` baseline, a second constant and the tiny LLaVA (memory must
  not grow with the number of models; the LLaVA's answers cost minutes per 1,000 on 2 cores);
- the memory curve: the ``constant`` baseline (no model to run, so what grows is the evaluation's
  own bookkeeping) on 2,000, 20,000 and 200,000 sampled questions and on all of them, each
  evaluation then rescored (``rescore`` of 20,000: median of 3).

Its targets (:func:`targets`): peak RSS at most the floor + ``ABOVE_FLOOR_MB`` (the
``above_floor_mb`` figures) for three models and for every N, evaluation and rescore; the rescore
of every question at most ``RESCORE_ALL_SECONDS``. One run each otherwise: the evaluation of every
question takes minutes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from lib.paths import PARAMS
from lib.records import host_state, record

THREE_MODELS_SIZE = 2_000
CURVE = (2_000, 20_000, 200_000, 0)  # 0: every question
RESCORE_REPEATS = 3  # the 20,000-question rescore's (the larger ones run once)
ABOVE_FLOOR_MB = 200  # peak RSS at most the floor plus this, at every N and with three models
RESCORE_ALL_SECONDS = 60

CHILD = r"""
import json, sys, time
from pathlib import Path
from lib.stages import evaluate as E
from lib.store import CallStore

def peak_rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

LLAVA = {"backend": "tiny", "name": "llava", "batch_size": 16}
MODELS = {"llava": LLAVA, "constant": {"backend": "constant", "answer": "yes"},
          "constant_no": {"backend": "constant", "answer": "no"}}
mode, folder, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
start = time.perf_counter()
if mode == "floor":  # what any evaluation holds: the imports, the model, one question answered
    from lib.families import task_of
    from lib.io import read_items_at
    from lib.models import load_model
    item = read_items_at(folder, [0])[0]
    model = load_model(LLAVA)
    model.generate([task_of(item).request(item, Path(folder), max_new_tokens=E.EvalConfig.max_new_tokens)])
    print(json.dumps({"seconds": time.perf_counter() - start, "predictions": 1, "peak_rss_mb": peak_rss_mb()}))
    sys.exit(0)
if mode == "eval":
    cfg = E.EvalConfig(datasets={"unique_all": folder}, models={m: MODELS[m] for m in sys.argv[5].split(",")},
                       styles=["zero_shot"], max_items=int(sys.argv[4]))  # the default 1,000 bootstrap resamples
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


def _evaluation(r: dict, floor: dict) -> dict:
    return {"predictions": r["predictions"], "seconds": round(r["seconds"], 1),
            "ms_per_question": round(1000 * r["seconds"] / r["predictions"], 2),
            # the pass over every line that draws the sample (the same for any sample size)
            "sampling_seconds": round(r["seconds"] - r["ask_seconds"] - r["rescore_seconds"], 1),
            # answering, per question, less the floor's seconds (importing torch, loading the model, one question)
            "ask_ms_per_question": round(1000 * (r["ask_seconds"] - floor["seconds"]) / r["predictions"], 2),
            "rescore_seconds": round(r["rescore_seconds"], 2), "peak_rss_mb": round(r["peak_rss_mb"]),
            "above_floor_mb": round(r["peak_rss_mb"] - floor["peak_rss_mb"])}


def _curve(root: Path, data: Path, floor: dict) -> list[dict]:
    """The constant baseline's evaluation and rescore at each N of :data:`CURVE`."""
    points = []
    for n in CURVE:
        out = root / f"constant{n}" / "06_evaluate"
        ev = _child("eval", data, out, n, "constant")
        rescores = [_child("rescore", data, out) for _ in range(RESCORE_REPEATS if n == 20_000 else 1)]
        rs = sorted(rescores, key=lambda r: r["seconds"])[len(rescores) // 2]
        points.append({"n": ev["predictions"], "evaluate_seconds": round(ev["seconds"], 1),
                       "evaluate_peak_rss_mb": round(ev["peak_rss_mb"]),
                       "evaluate_above_floor_mb": round(ev["peak_rss_mb"] - floor["peak_rss_mb"]),
                       "rescore_seconds": round(rs["seconds"], 2), "rescore_peak_rss_mb": round(rs["peak_rss_mb"]),
                       "rescore_above_floor_mb": round(rs["peak_rss_mb"] - floor["peak_rss_mb"]),
                       "rescore_all_seconds": [round(r["seconds"], 2) for r in rescores]})
    return points


def targets(curve: list[dict]) -> dict[str, str]:
    """Every peak RSS above the floor (three models; each N of the curve, evaluation and rescore) and the
    rescore of every question (the curve's last point) against their targets."""
    out = {"three_models.above_floor_mb": f"<= {ABOVE_FLOOR_MB}"}
    for i, _ in enumerate(curve):
        out.update({f"curve[{i}].{step}_above_floor_mb": f"<= {ABOVE_FLOOR_MB}" for step in ("evaluate", "rescore")})
    out[f"curve[{len(curve) - 1}].rescore_seconds"] = f"<= {RESCORE_ALL_SECONDS}"
    return out


def main() -> dict:
    before = host_state()
    from lib.families.scrapbook import generate
    from lib.stages.scrapbook import ScrapbookConfig

    root = Path(tempfile.mkdtemp(prefix="vqalab-bench-unique-all-"))
    try:
        data = root / "unique_all"
        # read as stage 04 reads its params file (it also holds the stage's own keys, e.g. compare_to_paper)
        params = ScrapbookConfig(**yaml.safe_load((PARAMS / "04_scrapbook.unique_all.yaml").read_text())).params()
        stats = generate(params, data, progress=False)
        size_mb = (data / "items.jsonl").stat().st_size / 2**20
        floor = _child("floor", data, root / "floor")
        three = _evaluation(_child("eval", data, root / "three" / "06_evaluate", THREE_MODELS_SIZE,
                                   "constant,constant_no,llava"), floor)
        curve = _curve(root, data, floor)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the dataset and every run's predictions: gigabytes
    result = {
        "dataset": {"questions": stats["questions"], "images": stats["images"], "items_jsonl_mb": round(size_mb)},
        # torch, transformers (which imports sympy and scipy), pandas, the tiny LLaVA, one question
        "floor_peak_rss_mb": round(floor["peak_rss_mb"]), "floor_seconds": round(floor["seconds"], 1),
        "three_models": {"models": ["constant", "constant_no", "llava"], "questions": THREE_MODELS_SIZE, **three},
        "curve": curve,
    }
    return record("scrapbook_eval", result, before, targets(curve))


if __name__ == "__main__":
    main()
