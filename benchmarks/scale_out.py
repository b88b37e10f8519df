"""Several processes on CPU (``make bench``): writes outputs/bench/scale_out.json.

Stage 06 and stage 05 as ``torchrun --standalone --nproc_per_node 2`` runs them beside one process
doing the same work, each a fresh subprocess with ``OMP_NUM_THREADS=1`` per rank (what
``tests/test_scale_out.py`` and ``tests/test_scale_out_train.py`` run, larger):

- evaluation: the tiny LLaVA on ``EVAL_ITEMS`` questions of a small Scrapbook set and the demo's
  mcq, vqa and yesbut sets, zero-shot and CoT, the call cache emptied before each run;
- training: ``STEPS`` steps of the tiny LLaVA on a small Scrapbook set, one process with batch
  ``2 x PER_RANK`` against two ranks of ``PER_RANK`` (the same examples per step).

The headlines are the ratios ``eval_two_process_speedup`` and ``train_two_process_speedup`` (2 at
best; on a machine of 2 cores the processes' start-up, their model loads and the main rank's merge
are paid beside the work shared), and their target that two processes save at least a tenth. Each
command's wall time includes its start; the figures say what a user waits for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.records import host_state, record
from lib.families.scrapbook import ScrapbookParams, generate
from lib.stages.setup import demo_datasets

TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}
STEPS, PER_RANK = 150, 8
EVAL_ITEMS = 600
# two processes must save at least a tenth of one process's time, whatever the start-up they pay (2 at
# best; well below on 2 cores: 1.22 and 1.15 when the target was set)
TARGETS = {"eval_two_process_speedup": ">= 1.1", "train_two_process_speedup": ">= 1.1"}


def _run(module: str, params: Path, out: Path, processes: int, outputs: Path) -> float:
    """Seconds of one ``python -m module`` (``processes`` ranks through torchrun when > 1)."""
    for f in (outputs / "cache").glob("calls.sqlite*"):
        f.unlink()  # every run generates: no answers from the one before
    env = {**os.environ, "VQALAB_OUTPUTS": str(outputs), "OMP_NUM_THREADS": "1"}
    args = ["-m", module, "--params", str(params), "--out", str(out)]
    cmd = (
        [sys.executable, *args]
        if processes == 1
        else [
            str(Path(sys.executable).with_name("torchrun")),
            "--standalone",
            f"--nproc_per_node={processes}",
            *args,
        ]
    )
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start


def scrapbook_set(root: Path) -> Path:
    data = root / "sb"
    if not (data / "items.jsonl").exists():
        generate(
            ScrapbookParams(
                canvas=[224, 224],
                size_start=40,
                size_step=10,
                n_sets=2,
                n_backgrounds=1,
                n_arrangements=2,
                n_region_pairs=3,
                n_questions_per_type=1,
                types=["presence", "counting"],
                groups=["np"],
                forms=["original"],
            ),
            data,
            progress=False,
        )
    return data


def evaluation(root: Path) -> dict:
    folders = {k: str(v) for k, v in demo_datasets(root / "data").items()}
    params = root / "06.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "datasets": {**folders, "scrapbook": str(scrapbook_set(root))},
                "models": {"tiny": TINY},
                "styles": ["zero_shot", "cot"],
                "max_new_tokens": 8,
                "cot_max_new_tokens": 16,
                "n_resamples": 200,
                "max_items": EVAL_ITEMS,
            }
        )
    )
    one = _run("lib.stages.evaluate", params, root / "e1" / "06_evaluate", 1, root / "outputs")
    two = _run("lib.stages.evaluate", params, root / "e2" / "06_evaluate", 2, root / "outputs")
    return {
        "eval_max_items_per_dataset": EVAL_ITEMS,
        "eval_seconds_one_process": round(one, 1),
        "eval_seconds_two_processes": round(two, 1),
        "eval_two_process_speedup": round(one / two, 2),
    }


def training(root: Path) -> dict:
    base = dict(
        model=TINY,
        dataset=str(scrapbook_set(root)),
        full_finetune=True,
        lr=1e-3,
        warmup_steps=2,
        max_steps=STEPS,
        eval_every=STEPS,
        eval_items=16,
        checkpoint_every=STEPS,
        seed=1,
        max_test=8,
    )
    seconds = {}
    for processes, batch in ((1, 2 * PER_RANK), (2, PER_RANK)):
        params = root / f"05_{processes}.yaml"
        params.write_text(yaml.safe_dump({**base, "batch_size": batch}))
        seconds[processes] = _run(
            "lib.stages.train",
            params,
            root / f"t{processes}" / "05_train",
            processes,
            root / "outputs",
        )
    return {
        "train_steps": STEPS,
        "train_global_batch": 2 * PER_RANK,
        "train_seconds_one_process": round(seconds[1], 1),
        "train_seconds_two_processes": round(seconds[2], 1),
        "train_two_process_speedup": round(seconds[1] / seconds[2], 2),
    }


def main() -> dict:
    before = host_state()
    with tempfile.TemporaryDirectory(prefix="vqalab-scale-out-") as tmp:
        root = Path(tmp)
        result = {**evaluation(root), **training(root)}
    return record("scale_out", result, before, TARGETS)


if __name__ == "__main__":
    print(main())
