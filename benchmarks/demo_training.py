"""Does the demo's training learn what it is asked, whatever the seed? (``make bench``)

Stage 05 exactly as the demo profile configures it (``params/05_train.demo.yaml``: the tiny random
LLaVA, its step budget, curriculum and answer-balanced draws), on the demo's training scenes
(stage 04's ``sets.train``, generated here as the stage generates them), once per seed in
``SEEDS``; the seed picks the split by image, the initial weights and the batches. Each run is the
command a user types, ``python -m lib.stages.train --profile demo --set seed=N``, in its own process.

Per seed and question type the record keeps the held-out accuracy of the trained model, of the
majority answer, of the trained model asked about blank pictures and of the untrained model, the
margins over the majority answer and over blank pictures (each with the lower end of its paired
interval over images, the stage's ``margins``), and the stage's training seconds. Its targets
(:func:`targets`): every seed's margins at least ``MARGINS`` with that lower end above zero, and
its training at most ``TRAIN_SECONDS``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.records import host_state, record
from lib import config
from lib.core.paths import ROOT
from lib.families.scrapbook import generate
from lib.stages.scrapbook import ScrapbookConfig
from lib.stages.train import TrainConfig

SEEDS = (0, 1, 2)
# trained minus the majority answer, and minus itself asked about blank pictures, held-out accuracy
# (tests/test_learning.py's gate holds the shipped training to the same)
MARGINS = {"presence": 0.15, "counting": 0.10}
TRAIN_SECONDS = 120  # the demo's training, halved (the fast-demo issue's target)
SLOW_REASON = (
    "the demo's 2,500 steps, each the model's own forward and backward at its size (a batch of 32 "
    "costs a step about twice one of 16, torch.compile gave no faster step); fewer steps (1,500 or "
    "2,000, colour first for 600 or 800) and fewer image tokens (25) missed seed 1's presence "
    "margin, 1,500 steps at twice the rate (6e-4) left seed 1 at the answer prior, batches of "
    "8 over the same steps missed seed 0's margins, and a tokenizer keeping the questions' words "
    "whole (rows of ~18 text tokens, not ~31) missed seed 0's counting margin over blank pictures "
    "at 2,000 and at 2,500 steps"
)


def _train_set(run: Path) -> None:
    """Stage 04's training scenes where stage 05's ``stage:`` reference finds them in ``run``."""
    scrapbook = config.resolve(ScrapbookConfig, "demo").cfg
    generate(
        scrapbook.set_params("train"), run / "04_scrapbook" / "datasets" / "train", progress=False
    )


def _seed(run: Path, seed: int) -> dict:
    out = run / f"05_train_seed{seed}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "lib.stages.train",
            "--profile",
            "demo",
            "--set",
            f"seed={seed}",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    summary = json.loads((out / "summary.json").read_text())
    per_type = {}
    margins = {(r["type"], r["over"]): r for r in summary["margins"]}
    for kind in MARGINS:
        key = f"accuracy_{kind}"
        per_type[kind] = {
            **{name: round(summary[name][key], 3) for name in ("trained", "majority", "blank")},
            "base": round(summary["base"][key], 3),
            "margin": round(summary["trained"][key] - summary["majority"][key], 3),
            "margin_low": margins[kind, "majority"]["ci_low"],
            "blank_margin": margins[kind, "blank"]["margin"],
            "blank_margin_low": margins[kind, "blank"]["ci_low"],
        }
    return {
        "seed": seed,
        "n_test": summary["n_test"],
        "steps": summary["training"]["steps"],
        "train_seconds": summary["train_seconds"],
        **per_type,
    }


def targets(runs: list[dict]) -> dict[str, str]:
    """Each seed's margins (``seeds[i].<type>.margin``) and training seconds against their targets."""
    out = {}
    for i, _ in enumerate(runs):
        for kind, target in MARGINS.items():
            for margin in ("margin", "blank_margin"):
                out[f"seeds[{i}].{kind}.{margin}"] = f">= {target}"
                out[f"seeds[{i}].{kind}.{margin}_low"] = "> 0"
        out[f"seeds[{i}].train_seconds"] = f"<= {TRAIN_SECONDS}"
    return out


def main() -> dict:
    before = host_state()
    cfg = config.resolve(TrainConfig, "demo").cfg
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        _train_set(run)
        runs = [_seed(run, seed) for seed in SEEDS]
    result = {
        "setup": {
            "model": cfg.model,
            "max_steps": cfg.max_steps,
            "focus_steps": cfg.focus_steps,
            "balance": cfg.balance,
            "lr": cfg.lr,
            "batch_size": cfg.batch_size,
        },
        "seeds": runs,
    }
    slow = {f"seeds[{i}].train_seconds": SLOW_REASON for i in range(len(runs))}
    return record("demo_training", result, before, targets(runs), slow)


if __name__ == "__main__":
    main()
