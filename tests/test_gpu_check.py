"""``make gpu-check`` (scripts/gpu_check.py): without a GPU one line, nothing written, exit 0;
its plan; its steps are functions going through the project's API, each recorded on its own, and
(on this CPU, with the tiny LLaVA) they run."""

import importlib
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys

import pytest

from lib.core.paths import ROOT
from scripts import gpu_check

STEP_NAMES = [
    "load",
    "generate",
    "loglik",
    "load",
    "generate",
    "loglik",
    "lora",
    "eval_2proc",
    "vllm",
]


def _script(tmp_path, *args) -> subprocess.CompletedProcess:
    """The script as make runs it, with no CUDA device visible and outputs in ``tmp_path/outputs``."""
    env = {
        **os.environ,
        "VQALAB_OUTPUTS": str(tmp_path / "outputs"),
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "scripts.gpu_check", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_without_a_gpu_it_says_so_in_one_line_writes_nothing_and_exits_0(tmp_path):
    r = _script(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (
        r.stdout.strip()
        == gpu_check.NO_GPU
        == "no CUDA GPU here: gpu-check needs one; nothing was run"
    )
    assert not (tmp_path / "outputs").exists()  # no gpu.json, not even the folder


def test_make_gpu_check_runs_the_script_after_the_venv():
    makefile = (ROOT / "Makefile").read_text()
    assert "gpu-check: $(STAMP)\n\t$(PY) -m scripts.gpu_check\n" in makefile
    assert "gpu-check" in next(line for line in makefile.splitlines() if line.startswith(".PHONY"))
    if shutil.which("make"):  # -n: prints the recipe, runs nothing (not even the venv's)
        r = subprocess.run(
            ["make", "-n", "gpu-check"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0 and ".venv/bin/python -m scripts.gpu_check" in r.stdout


def test_dry_run_prints_the_plan_without_a_gpu_and_writes_nothing(tmp_path):
    r = _script(tmp_path, "--dry-run", "--tiny")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "gpu-check plan (profile real, 0 CUDA device(s))" in out
    assert (
        '"name": "llava"' in out and '"dtype": "bfloat16"' in out and '"device_map": "auto"' in out
    )
    step_lines = [
        line.split() for line in out.splitlines() if line.startswith(("  run ", "  skip "))
    ]
    assert [line[1] for line in step_lines] == STEP_NAMES
    eval_line = next(line for line in out.splitlines() if " eval_2proc " in line)
    assert eval_line.lstrip().startswith("skip") and "needs 2 GPUs" in eval_line
    assert out.strip().endswith(f"(dry run) {gpu_check.NO_GPU}")
    assert not (tmp_path / "outputs").exists()


def _resolve(dotted: str):
    """``a.b.C.method`` -> the object: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize("devices", [1, 2])
def test_the_plan_lists_every_step_each_a_function_through_the_projects_api(devices):
    p = gpu_check.plan(devices, tiny=True)
    assert [s["step"] for s in p["steps"]] == STEP_NAMES
    for s in p["steps"]:
        fn, uses = gpu_check.STEPS[s["step"]]
        assert inspect.isfunction(fn) and list(inspect.signature(fn).parameters)[:2] == [
            "ctx",
            "role",
        ]
        assert s["uses"] and s["uses"] == list(uses)
        for name in uses:
            assert callable(_resolve(name)), name
    skips = {s["step"]: s["skip"] for s in p["steps"]}
    assert (skips["eval_2proc"] is None) == (devices >= 2)
    if devices < 2:
        assert "needs 2 GPUs" in skips["eval_2proc"]
    assert (skips["vllm"] is None) == (importlib.util.find_spec("vllm") is not None)
    for _role, m in p["models"].items():
        assert (
            m["spec"]["backend"] == "tiny"
            and m["spec"]["dtype"] == "bfloat16"
            and m["spec"]["device_map"] == "auto"
        )


def test_real_models_are_tried_first_and_tiny_ones_stand_in_saying_why(monkeypatch):
    monkeypatch.setattr(gpu_check, "preflight_problem", lambda spec, offline: None)
    real = gpu_check.pick_models("real")
    assert (
        real["vlm"]["spec"]["name"] == "Qwen/Qwen2-VL-7B-Instruct"
        and real["llm"]["spec"]["backend"] == "hf"
    )
    assert real["vlm"]["source"] == "params/common.real.yaml models.vlm"
    assert {real[r]["spec"][k] for r in gpu_check.ROLES for k in ("dtype", "device_map")} == {
        "bfloat16",
        "auto",
    }
    monkeypatch.setattr(
        gpu_check, "preflight_problem", lambda spec, offline: "not in the local hub cache"
    )
    tiny = gpu_check.pick_models("real")
    assert tiny["vlm"]["spec"]["name"] == "llava"
    assert tiny["vlm"]["note"] == "instead of Qwen/Qwen2-VL-7B-Instruct: not in the local hub cache"


def _ok(ctx, role):
    return {"requests_per_s": 1.0}


def _fails(ctx, role):
    raise RuntimeError("CUDA out of memory (simulated)")


def test_a_failing_step_is_recorded_and_the_next_one_runs(monkeypatch, tmp_path):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path))
    monkeypatch.setattr(
        gpu_check, "STEPS", {"load": (_ok, ()), "generate": (_fails, ()), "loglik": (_ok, ())}
    )
    spec = {"backend": "tiny", "name": "llava", **gpu_check.GPU_KEYS}
    p = {
        "profile": "real",
        "device_count": 1,
        "models": {"vlm": {"spec": spec, "source": "test"}},
        "steps": [
            {"step": "load", "model": "vlm", "skip": None, "uses": []},
            {"step": "generate", "model": "vlm", "skip": None, "uses": []},
            {"step": "loglik", "model": "vlm", "skip": "needs something (test)", "uses": []},
            {"step": "loglik", "model": "vlm", "skip": None, "uses": []},
        ],
    }
    result = gpu_check.run_check(p, gpu_check.Budget())
    assert result == json.loads((tmp_path / "bench" / "gpu.json").read_text())
    assert [r["status"] for r in result["steps"]] == ["ok", "error", "skipped", "ok"]
    failed = result["steps"][1]
    assert (
        failed["error"] == "RuntimeError: CUDA out of memory (simulated)"
        and "_fails" in failed["traceback"]
    )
    assert all(
        "seconds" in r and "peak_gpu_mb" in r for r in result["steps"] if r["status"] != "skipped"
    )
    assert result["summary"] == {
        "ran": ["load/vlm", "loglik/vlm"],
        "skipped": {"loglik/vlm": "needs something (test)"},
        "failed": {"generate/vlm": "RuntimeError: CUDA out of memory (simulated)"},
    }
    assert {
        "gpu",
        "versions",
        "commit",
        "date",
        "budget",
        "models",
        "steps",
        "summary",
        "machine",
        "load",
    } <= set(result)
    assert {"name", "count", "devices"} <= set(result["gpu"]) and {"torch", "cuda"} <= set(
        result["versions"]
    )
    assert {"sha", "dirty"} <= set(result["commit"])


@pytest.mark.slow
def test_the_steps_run_on_this_cpu_with_the_tiny_llava(tmp_path):
    """What the GPU runs, on the CPU at a toy budget: every call's signature meets the real API."""
    p = gpu_check.plan(0, tiny=True)
    budget = gpu_check.Budget(
        requests=4,
        new_tokens=4,
        one_at_a_time=2,
        lora_steps=2,
        lora_batch=2,
        lora_val_items=2,
        eval_items=4,
        eval_tokens=4,
    )
    ctx = gpu_check.Check(p, budget, tmp_path)
    try:
        rows = {
            s["step"]: gpu_check.run_step(ctx, {**s, "skip": None})
            for s in p["steps"]
            if s["model"] == "vlm"
        }
    finally:
        ctx.release()
    statuses = {k: r["status"] for k, r in rows.items()}
    assert statuses == dict.fromkeys(["load", "generate", "loglik", "lora", "eval_2proc"], "ok"), {
        k: r.get("error") for k, r in rows.items()
    }
    assert rows["load"]["dtypes"] == ["bfloat16"] and rows["load"]["spec"]["device_map"] == "auto"
    assert rows["generate"]["requests"] == 4 and rows["generate"]["tokens_per_s"] > 0
    assert rows["generate"]["one_at_a_time"]["requests"] == 2
    assert rows["loglik"]["methods"] == ["constrained:loglik"] and rows["loglik"]["valid"] == 4
    assert (
        rows["lora"]["mode"] == "lora"
        and rows["lora"]["steps"] == 2
        and len(rows["lora"]["losses"]) == 2
    )
    two = rows["eval_2proc"]
    assert (
        two["all_merged"]
        and two["questions"] == 4
        and sum(s["computed"] for s in two["shards"]) == 4
    )
    assert all(r["peak_gpu_mb"] is None for r in rows.values())  # no CUDA here: nothing to measure
