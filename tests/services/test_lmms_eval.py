"""A real lmms-eval (0.7.3, in the venv ``services/lmms-eval-venv.sh`` builds) runs VQA Lab's export
(``python -m lib.export lmms-eval --profile demo``) of the demo's mcq and vqa datasets on the demo's
untrained tiny LLaVA: every reply and every metric equal stage 06's on the same model (its chat
path, ``doc_to_messages``), and a ``--limit`` run that leaves subsets out still reports. Its
``--log_samples`` output imported as a foreign run (issue #46) pairs with stage 06 item by item.

``VQALAB_LMMS_EVAL_PYTHON`` names that venv's python (the Makefile sets it). Without it this test
skips, unless ``VQALAB_SERVICES_REQUIRED=1`` (``make test-services``), where it fails instead."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from lib.compare.explain import compare
from lib.config import replaced, resolve
from lib.core.schema import Prediction
from lib.eval.foreign import import_lmms_eval
from lib.export.harnesses import main as export
from lib.io import load_items, read_jsonl
from lib.models.store import CallStore
from lib.models.tiny import tiny_vlm_path
from lib.stages import evaluate
from lib.stages.setup import demo_datasets
from tests.support.stage06 import rescored

from .conftest import _python

MODEL = "untrained"  # the demo's 06 label of the tiny LLaVA stage 05 starts from (random weights)
DATASETS = ("mcq", "vqa")
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@pytest.fixture(scope="module")
def lmms_eval_python() -> str:
    return _python("VQALAB_LMMS_EVAL_PYTHON", "the lmms-eval venv")


@pytest.fixture(scope="module")
def setup(lmms_eval_python, tmp_path_factory):
    """The demo datasets, their lmms-eval export (demo profile, MODEL's question order) and stage 06
    on them with MODEL, unconstrained and zero-shot as the export asks."""
    root = tmp_path_factory.mktemp("lmms-eval")
    folders = demo_datasets(root / "data")
    for name in DATASETS:
        assert (
            export(
                [
                    "lmms-eval",
                    "--dataset",
                    str(folders[name]),
                    "--out",
                    str(root / "tasks" / name),
                    "--profile",
                    "demo",
                    "--model",
                    MODEL,
                ]
            )
            == 0
        )
    cfg = resolve(
        evaluate.EvalConfig,
        "demo",
        overrides={
            "datasets": {name: str(folders[name]) for name in DATASETS},
            "demo_data": False,
            "models": {MODEL: "student"},
            "styles": ["zero_shot"],
            "constrain": False,
            "judge": None,
        },
    ).cfg
    start = time.perf_counter()
    evaluate.run(cfg, root / "06_evaluate", store=CallStore(root / "calls.sqlite"), progress=False)
    spec = cfg.models[MODEL]
    assert spec["backend"] == "tiny" and spec["name"] == "llava"
    folder = tiny_vlm_path(
        "llava",
        int(spec.get("seed", 0)),
        image_size=int(spec["image_size"]),
        patch=int(spec["patch"]),
    )
    preds = {
        (p["dataset"], p["item_id"]): p
        for p in read_jsonl(root / "06_evaluate" / "predictions.jsonl")
    }
    metrics = pd.read_csv(root / "06_evaluate" / "metrics.csv")
    return {
        "root": root,
        "cfg": cfg,
        "folders": folders,
        "model": folder,
        "preds": preds,
        "metrics": metrics,
        "stage06_s": time.perf_counter() - start,
    }


def lmms_eval(
    python: str, model: Path, tasks: list[str], root: Path, out: str, *extra: str
) -> dict:
    """lmms-eval's CLI on the exported tasks; it exits 0 even after errors, so the results file and
    the log say whether it worked. Returns its results and its samples by task."""
    argv = [
        python,
        "-m",
        "lmms_eval",
        "--model",
        "llava_hf",
        "--model_args",
        f"pretrained={model},device_map=cpu",
        "--device",
        "cpu",
        "--include_path",
        str(root / "tasks"),
        "--tasks",
        ",".join(tasks),
        "--batch_size",
        "1",
        "--output_path",
        str(root / out),
        "--log_samples",
        *extra,
    ]
    env = {**os.environ, **OFFLINE, "HF_DATASETS_CACHE": str(root / "hf-datasets")}
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=420, cwd=root, env=env)
    seconds = time.perf_counter() - start
    log = done.stdout + done.stderr
    results = sorted((root / out).rglob("*_results.json"))
    assert done.returncode == 0 and results, log[-4000:]
    assert "Traceback" not in log and not re.search(r"\|\s*ERROR\s*\|", log), log[-4000:]
    samples = {
        f.stem.split("_samples_", 1)[1]: [json.loads(line) for line in f.open()]
        for f in (root / out).rglob("*_samples_*.jsonl")
    }
    return {"results": json.loads(results[-1].read_text()), "samples": samples, "seconds": seconds}


def stage06_values(metrics: pd.DataFrame, dataset: str) -> dict[str, float]:
    """Stage 06's metrics of MODEL on ``dataset``, named as the export names them."""
    rows = metrics[
        (metrics.model == MODEL) & (metrics.dataset == dataset) & (metrics["style"] == "zero_shot")
    ]
    return {
        r.metric if r.subset == "all" else f"{r.metric}[{r.subset}]": float(r.value)
        for r in rows.itertuples()
    }


def reported(results: dict, task: str) -> dict[str, float]:
    return {
        k.removesuffix(",none"): v
        for k, v in results["results"][task].items()
        if k.endswith(",none") and "_stderr" not in k
    }


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


@pytest.fixture(scope="module")
def full_run(lmms_eval_python, setup) -> dict:
    """lmms-eval on every doc of both exports (reached through their tags)."""
    root = setup["root"]
    infos = {
        name: json.loads((root / "tasks" / name / "vqalab.json").read_text()) for name in DATASETS
    }
    return {
        "infos": infos,
        **lmms_eval(
            lmms_eval_python,
            setup["model"],
            [infos[name]["tag"] for name in DATASETS],
            root,
            "full",
        ),
    }


def test_lmms_eval_asks_and_scores_as_stage_06(setup, full_run):
    preds, infos, run = setup["preds"], full_run["infos"], full_run
    assert all(
        info["question_first"]
        and set(info["max_new_tokens"].values()) == {setup["cfg"].max_new_tokens}
        for info in infos.values()
    )  # the demo's settings, not the export's own defaults
    equal = unstripped = total = metrics_equal = n_metrics = 0
    for name in DATASETS:
        (task,) = infos[name]["tasks"]  # reached through the tag
        samples = run["samples"][task]
        assert len(samples) == len(load_items(setup["folders"][name]))
        for s in samples:
            row = s["invalid_rate"]  # what process_results handed every aggregation
            raw = preds[(name, row["id"])]["raw"]
            total += 1
            equal += (
                row["raw"] == raw.strip()
            )  # lmms-eval strips every reply before process_results
            unstripped += row["raw"] == raw
        ours, theirs = reported(run["results"], task), stage06_values(setup["metrics"], name)
        assert set(ours) == set(theirs), set(ours) ^ set(theirs)
        n_metrics += len(ours)
        metrics_equal += sum(same(ours[m], theirs[m]) for m in ours)
    print(
        json.dumps(
            {
                "lmms_eval": {
                    "outputs_equal": f"{equal}/{total}",
                    "equal_unstripped": f"{unstripped}/{total}",
                    "metrics_equal": f"{metrics_equal}/{n_metrics}",
                    "lmms_eval_s": round(run["seconds"], 1),
                    "stage06_s": round(setup["stage06_s"], 1),
                }
            }
        )
    )
    assert equal == total and metrics_equal == n_metrics


def test_its_samples_imported_pair_with_stage_06_item_by_item(setup, full_run):
    """The run's --log_samples output imported (:mod:`lib.eval.foreign`, the exports found where
    lmms-eval read them) is stage 06's run: every reply as the model gave it, every item paired and
    unchanged, the same numbers. Against stage 06 with constrained decoding (the demo's own
    setting) every mcq item is a prompt change, ``constraint``, and nothing else changes."""
    root = setup["root"]
    record = import_lmms_eval(root / "full", root / "imported")
    assert record["path"] == "chat" and record["logged_input"] == 16 and record["model"] == MODEL
    imported = {
        (p["dataset"], p["item_id"]): p for p in read_jsonl(root / "imported" / "predictions.jsonl")
    }
    assert imported.keys() == setup["preds"].keys()
    raw_equal = sum(imported[k]["raw"] == p["raw"] for k, p in setup["preds"].items())
    truncated_equal = sum(
        imported[k]["truncated"] == p["truncated"] for k, p in setup["preds"].items()
    )
    result = compare(root / "06_evaluate", root / "imported")
    print(
        json.dumps(
            {
                "lmms_eval_imported": {
                    "raw_equal": f"{raw_equal}/{len(imported)}",
                    "paired": result["paired"],
                    "changed": result["changed"],
                    "truncated_equal": truncated_equal,
                }
            }
        )
    )
    assert raw_equal == len(imported) == 16 and truncated_equal == 16
    assert (
        result["paired"] == 16
        and result["only_A"] == result["only_B"] == 0
        and result["changed"] == 0
    )
    assert all(m["difference"] == 0 for m in result["metrics"])
    ours, theirs = (
        pd.read_csv(f / "metrics.csv").set_index(["dataset", "metric", "subset"])["value"]
        for f in (root / "06_evaluate", root / "imported")
    )
    assert theirs.to_dict() == pytest.approx(ours.to_dict(), abs=1e-12, nan_ok=True)

    constrained = replaced(setup["cfg"], constrain=True)
    evaluate.run(
        constrained, root / "06_constrained", store=CallStore(root / "calls.sqlite"), progress=False
    )
    result = compare(root / "06_constrained", root / "imported")
    changed = {(it["dataset"], it["cause"], tuple(it["because"])) for it in result["items"]}
    assert (
        result["paired"] == 16
        and result["changed"] == 8
        and changed == {("mcq", "prompt", ("constraint",))}
    )
    assert sum(c["items"] for c in result["causes"].values()) == result["changed"]
    for m in result[
        "metrics"
    ]:  # every paired item on one cause: the shares add up to the difference
        assert sum(m["by_cause"].values()) == pytest.approx(m["difference"], abs=1e-12)


def test_a_limited_run_reports_nan_for_the_subsets_it_left_out(lmms_eval_python, setup):
    """``--limit 3`` on the mcq task (the first three docs): subsets they lack are NaN, every other
    metric is stage 06's on those three predictions."""
    root, name = setup["root"], "mcq"
    info = json.loads((root / "tasks" / name / "vqalab.json").read_text())
    (task,) = info["tasks"]
    run = lmms_eval(lmms_eval_python, setup["model"], [task], root, "limit3", "--limit", "3")
    ids = [s["invalid_rate"]["id"] for s in run["samples"][task]]
    assert len(ids) == 3
    assert [s["invalid_rate"]["raw"] for s in run["samples"][task]] == [
        setup["preds"][(name, i)]["raw"].strip() for i in ids
    ]
    preds = [Prediction.from_dict(setup["preds"][(name, i)]) for i in ids]
    theirs = stage06_values(rescored(setup["cfg"], preds, root / "limit3-stage06")[1], name)
    ours = reported(run["results"], task)
    left_out = set(ours) - set(theirs)
    assert left_out and set(theirs) <= set(ours)
    assert all(math.isnan(ours[m]) for m in left_out), {m: ours[m] for m in left_out}
    assert all(same(ours[m], theirs[m]) for m in theirs), {m: (ours[m], theirs[m]) for m in theirs}
    print(
        json.dumps(
            {"lmms_eval_limit3": {"nan": sorted(left_out), "lmms_eval_s": round(run["seconds"], 1)}}
        )
    )
    import_lmms_eval(
        root / "limit3", root / "imported-limit3"
    )  # its three answers pair, the rest stage 06's alone
    result = compare(root / "06_evaluate", root / "imported-limit3")
    assert (result["paired"], result["only_A"], result["only_B"], result["changed"]) == (
        3,
        13,
        0,
        0,
    )
