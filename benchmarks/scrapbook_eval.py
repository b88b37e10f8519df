"""Scrapbook-scale evaluation (``make bench``): writes outputs/bench/scrapbook_eval.json.

The ``unique_all`` dataset (params/04_scrapbook.unique_all.yaml, generated once into a temporary
folder), then in fresh subprocesses (each peak RSS its own):

- the floor of any evaluation with a model: a process that imports what stage 06 imports, loads
  the tiny LLaVA and answers one question;
- three models in one evaluation of 2,000 sampled questions (zero-shot, a fresh call cache: every
  question is asked): the ``constant`` baseline, a second constant and the tiny LLaVA (memory must
  not grow with the number of models): peak RSS against that floor;
- two memory curves, each measured against its own floor - the same evaluator's smallest run
  (2,000 questions), evaluation against evaluation and rescore against rescore - so that what
  grows with the number of questions shows, not what a model or an import costs:

  - ``constant``: the baseline that loads no model (what grows is the evaluation's own
    bookkeeping: sampling, asking, predictions, the scorer) on 2,000, 20,000 and 200,000 sampled
    questions and on all of them, each evaluation then rescored (``rescore`` of 20,000: median of 3);
  - ``llava``: the tiny LLaVA answering every question of 2,000 and of 20,000 (five of the
    evaluation's chunks of questions, so whatever the model path kept from chunk to chunk would
    show), each then rescored (its answers are texts of its own, read one by one); and all of the
    questions in a process that loads the tiny LLaVA, answers one question with it and keeps it
    (the floor's work) before evaluating every question with the answering bounded - the
    ``constant`` baseline answers them. Answering every question with the LLaVA itself would make
    this benchmark many times longer (its ``ask_ms_per_question`` times the questions, on 2 cores);
    this point measures the evaluation of every question beside a loaded model, torch and its
    allocator, and the two points before it what the model's own answering keeps; the rescore of
    the constant's answers is the ``constant`` curve's last point.

Its targets (:func:`targets`): peak RSS at most the floor + ``ABOVE_FLOOR_MB`` for three models;
on each curve, every point's growth over the curve's first (``evaluate_growth_mb``,
``rescore_growth_mb``) at most ``GROWTH_MB``; the rescore of every question at most
``RESCORE_ALL_SECONDS``. One run each otherwise: the evaluation of every question takes minutes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from benchmarks.records import host_state, record
from lib.core.paths import PARAMS

THREE_MODELS_SIZE = 2_000
CURVE = (2_000, 20_000, 200_000, 0)  # the constant baseline's; 0: every question
LLAVA_CURVE = (
    2_000,
    20_000,
)  # the tiny LLaVA answering every question; then every question beside it (LOADED)
LOADED = "loaded"  # the LLaVA curve's last point: the model loaded, the constant baseline answering every question
RESCORE_REPEATS = 3  # the 20,000-question rescore's (the larger ones run once)
ABOVE_FLOOR_MB = (
    200  # three models: peak RSS at most the floor (imports, the LLaVA, one question) plus this
)
GROWTH_MB = (
    100  # on each curve: peak RSS at most the curve's first point (2,000 questions) plus this
)
RESCORE_ALL_SECONDS = 60

CHILD = r"""
import json, sys, time
from pathlib import Path
from lib.stages import evaluate as E
from lib.models.store import CallStore

def peak_rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

LLAVA = {"backend": "tiny", "name": "llava", "batch_size": 16}
MODELS = {"llava": LLAVA, "constant": {"backend": "constant", "answer": "yes"},
          "constant_no": {"backend": "constant", "answer": "no"}}
mode, folder, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
start = time.perf_counter()
if mode in ("floor", "loaded"):  # what any evaluation with a model holds: the imports, the model, one question
    from lib.tasks.registry import task_of
    from lib.io import read_items_at
    from lib.models import load_model
    item = read_items_at(folder, [0])[0]
    model = load_model(LLAVA)  # kept: "loaded" evaluates every question beside it
    model.generate([task_of(item).request(item, Path(folder), max_new_tokens=E.EvalConfig.max_new_tokens)])
    if mode == "floor":
        print(json.dumps({"seconds": time.perf_counter() - start, "predictions": 1, "peak_rss_mb": peak_rss_mb()}))
        sys.exit(0)
if mode in ("eval", "loaded"):
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
    r = subprocess.run(
        [sys.executable, "-c", CHILD, *map(str, args)], capture_output=True, text=True
    )
    if r.returncode:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _evaluation(r: dict, floor: dict) -> dict:
    return {
        "predictions": r["predictions"],
        "seconds": round(r["seconds"], 1),
        "ms_per_question": round(1000 * r["seconds"] / r["predictions"], 2),
        # the pass over every line that draws the sample (the same for any sample size)
        "sampling_seconds": round(r["seconds"] - r["ask_seconds"] - r["rescore_seconds"], 1),
        # answering, per question, less the floor's seconds (importing torch, loading the model, one question)
        "ask_ms_per_question": round(
            1000 * (r["ask_seconds"] - floor["seconds"]) / r["predictions"], 2
        ),
        "rescore_seconds": round(r["rescore_seconds"], 2),
        "peak_rss_mb": round(r["peak_rss_mb"]),
        "above_floor_mb": round(r["peak_rss_mb"] - floor["peak_rss_mb"]),
    }


def _point(
    root: Path, data: Path, name: str, n: int, mode: str, model: str, repeats: int = 1
) -> dict:
    """One evaluation (``mode``: ``eval``, or ``loaded`` beside the tiny LLaVA) of ``n`` questions
    (0: all) by ``model``, then (not after ``loaded``) its rescore ``repeats`` times (the median kept)."""
    out = root / f"{name}{n}" / "06_evaluate"
    ev = _child(mode, data, out, n, model)
    point = {
        "n": ev["predictions"],
        "evaluate_seconds": round(ev["seconds"], 1),
        "ask_ms_per_question": round(1000 * ev["ask_seconds"] / ev["predictions"], 2),
        "evaluate_peak_rss_mb": round(ev["peak_rss_mb"]),
    }
    if mode == LOADED:
        shutil.rmtree(out.parent, ignore_errors=True)
        return {**point, "answered_by": model, "model_loaded": "llava"}
    rescores = [_child("rescore", data, out) for _ in range(repeats)]
    rs = sorted(rescores, key=lambda r: r["seconds"])[len(rescores) // 2]
    shutil.rmtree(out.parent, ignore_errors=True)  # a run's predictions: up to a gigabyte
    return {
        **point,
        "answered_by": model,
        "rescore_seconds": round(rs["seconds"], 2),
        "rescore_peak_rss_mb": round(rs["peak_rss_mb"]),
        "rescore_all_seconds": [round(r["seconds"], 2) for r in rescores],
    }


def _with_growth(points: list[dict]) -> list[dict]:
    """Each point with its growth over the curve's first (its floor), evaluation and rescore apart."""
    first = points[0]
    for p in points:
        for step in ("evaluate", "rescore"):
            if f"{step}_peak_rss_mb" in p:
                p[f"{step}_growth_mb"] = p[f"{step}_peak_rss_mb"] - first[f"{step}_peak_rss_mb"]
    return points


def curves(root: Path, data: Path) -> dict[str, list[dict]]:
    """The ``constant`` baseline at each N of :data:`CURVE`; the tiny LLaVA at each N of
    :data:`LLAVA_CURVE`, then every question beside it (:data:`LOADED`)."""
    constant = [
        _point(root, data, "constant", n, "eval", "constant", RESCORE_REPEATS if n == 20_000 else 1)
        for n in CURVE
    ]
    llava = [_point(root, data, "llava", n, "eval", "llava") for n in LLAVA_CURVE]
    llava.append(_point(root, data, "loaded", 0, LOADED, "constant"))
    return {"constant": _with_growth(constant), "llava": _with_growth(llava)}


def targets(curves: dict[str, list[dict]]) -> dict[str, str]:
    """Three models' peak RSS above the floor; on each curve every point's growth over its first,
    evaluation and rescore; the rescore of every question (the constant curve's last point)."""
    out = {"three_models.above_floor_mb": f"<= {ABOVE_FLOOR_MB}"}
    for name, points in curves.items():
        for i, p in enumerate(points[1:], start=1):
            out.update(
                {
                    f"curves.{name}[{i}].{step}_growth_mb": f"<= {GROWTH_MB}"
                    for step in ("evaluate", "rescore")
                    if f"{step}_growth_mb" in p
                }
            )
    out[f"curves.constant[{len(curves['constant']) - 1}].rescore_seconds"] = (
        f"<= {RESCORE_ALL_SECONDS}"
    )
    return out


def main() -> dict:
    before = host_state()
    from lib.families.scrapbook import generate
    from lib.stages.scrapbook import ScrapbookConfig

    root = Path(tempfile.mkdtemp(prefix="vqalab-bench-unique-all-"))
    try:
        data = root / "unique_all"
        # read as stage 04 reads its params file (it also holds the stage's own keys, e.g. compare_to_paper)
        cfg = ScrapbookConfig(
            **yaml.safe_load((PARAMS / "04_scrapbook.unique_all.yaml").read_text())
        )
        stats = generate(cfg.params(), data, progress=False, question_worker=cfg.question_worker)
        size_mb = (data / "items.jsonl").stat().st_size / 2**20
        floor = _child("floor", data, root / "floor")
        three = _evaluation(
            _child(
                "eval",
                data,
                root / "three" / "06_evaluate",
                THREE_MODELS_SIZE,
                "constant,constant_no,llava",
            ),
            floor,
        )
        measured = curves(root, data)
    finally:
        shutil.rmtree(
            root, ignore_errors=True
        )  # the dataset and every run's predictions: gigabytes
    result = {
        "dataset": {
            "questions": stats["questions"],
            "images": stats["images"],
            "items_jsonl_mb": round(size_mb),
        },
        # torch, transformers (which imports sympy and scipy), pandas, the tiny LLaVA, one question
        "floor_peak_rss_mb": round(floor["peak_rss_mb"]),
        "floor_seconds": round(floor["seconds"], 1),
        "three_models": {
            "models": ["constant", "constant_no", "llava"],
            "questions": THREE_MODELS_SIZE,
            **three,
        },
        "curves": measured,
    }
    return record("scrapbook_eval", result, before, targets(measured))


if __name__ == "__main__":
    main()
