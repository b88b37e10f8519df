"""Stage 06's own cost: the evaluation beside a bare transformers loop asking the same questions.

Both sides ask the same model folder the same Scrapbook questions (``N_ITEMS`` of a set drawn as the
demo draws its fresh set, ``params/04_scrapbook.demo.yaml``'s ``sets.fresh``, sampled by stage 06's
own sampler with the demo's seed), with the same prompt text (built once here by the project's
request building and chat template) and the same pictures, and must give the same replies
(``mismatches`` counts the items whose replies differ; the benchmark stops on any at batch 1). The
bare side is its own process, ``python -m benchmarks.overhead bare JOB``, which imports torch,
transformers and PIL and nothing of the project (nor the OpenMP spin ``import lib`` sets: the
user's own, else libgomp's): each picture decoded once, then item by item
``processor(...)`` and ``model.generate(do_sample=False, max_new_tokens=N)``. Stage 06 is the command a
user types, ``python -m lib.stages.evaluate --profile demo --set ... --out DIR``, with its own fresh
call cache (``VQALAB_OUTPUTS`` a new folder), free decoding (``constrain=false``: the bare side has no
answer-set constraint), zero-shot only, no judge; once at batch 1 like the bare side
(``stage06``), once with the backend's default batching (``stage06_batched``).

Two kinds of answer: ``short``, the demo's trained model (stage 05 as the demo trains it, ``python
-m lib.stages.train --profile demo``; ``--trained DIR`` takes a folder already trained) answering
in at most ``SHORT_TOKENS`` tokens, and ``long``, the untrained demo student (the demo profile's
``student``, :func:`demo_student`), which rarely stops, answering in
``LONG_TOKENS``. For each side the record keeps ``end_to_end_s`` (process start to exit, imports
and model load included, on ``N_ITEMS`` questions) and ``per_item_ms`` (the slope between that run
and one of a tenth of the questions, which removes every fixed cost), each the median of
``REPEATS`` runs taken in turn; ``end_to_end_ratio`` and ``per_item_ratio`` are stage 06's over the
bare loop's. Targets: stage 06 at batch 1 at most 1.2 times the bare loop end to end and 1.05
times per item, on short and on long answers, with identical replies.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N_ITEMS = 300
REPEATS = 3
SHORT_TOKENS = 8  # the demo's stage 06 token limit
LONG_TOKENS = 64
SEED = 1  # the demo's stage 06 seed: the sample it draws
RATIO = {"end_to_end_ratio": "<= 1.2", "per_item_ratio": "<= 1.05"}
TARGETS = {
    **{f"{kind}.{name}": rule for kind in ("short", "long") for name, rule in RATIO.items()},
    "short.mismatches": "== 0",
    "long.mismatches": "== 0",
}
SIDES = ("bare", "stage06", "stage06_batched")


def bare(job_path: str) -> None:
    """The bare loop (its own process: torch, transformers and PIL, nothing of the project): the
    job's model, each picture decoded once, each question put in the chat template and through
    ``processor(...)`` and greedy ``generate`` alone; the replies written to the job's ``replies``
    file."""
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    job = json.loads(Path(job_path).read_text())
    model = AutoModelForImageTextToText.from_pretrained(job["model"]).eval()
    processor = AutoProcessor.from_pretrained(job["model"])
    pictures = {}
    replies = []
    for q in job["questions"]:
        images = []
        for path in q["images"]:
            if path not in pictures:
                with Image.open(path) as im:
                    pictures[path] = im.convert("RGB")
            images.append(pictures[path])
        text = processor.apply_chat_template(
            q["messages"], add_generation_prompt=True, tokenize=False
        )
        inputs = processor(text=[text], images=images or None, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**inputs, do_sample=False, max_new_tokens=job["max_new_tokens"])
        new = out[:, inputs["input_ids"].shape[1] :]
        replies.append(processor.batch_decode(new, skip_special_tokens=True)[0])
    Path(job["replies"]).write_text(json.dumps(replies))


def _env(outputs: Path | None = None, bare: bool = False) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if bare:  # nothing of lib's: the spin as the user's environment has it, not lib's marked choice
        from lib import SPIN_MARK, set_spin, users_spin

        spin = users_spin(env)
        for key in ("GOMP_SPINCOUNT", SPIN_MARK):
            env.pop(key, None)
        if spin is not None:
            set_spin(spin, env)
    if outputs is not None:
        env["VQALAB_OUTPUTS"] = str(outputs)
    return env


def _timed(cmd: list[str], env: dict) -> float:
    from lib.core.paths import ROOT

    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return seconds


def trained_model(tmp: Path) -> Path:
    """Stage 05 as the demo trains it, on the demo's training scenes (as benchmarks/demo_training.py
    makes them): its ``best`` folder."""
    from benchmarks.demo_training import _train_set

    _train_set(tmp)
    out = tmp / "05_train"
    _timed(
        [sys.executable, "-m", "lib.stages.train", "--profile", "demo", "--out", str(out)], _env()
    )
    return out / "best"


def question_sets(tmp: Path, n: int) -> dict[int, Path]:
    """The Scrapbook set drawn like the demo's fresh one, sampled to ``n`` questions as stage 06
    samples (whole images, the demo's seed), written as two dataset folders: the ``n`` questions
    and their first tenth."""
    import shutil

    from lib import config
    from lib.eval.items import load_eval_items
    from lib.eval.settings import EvalConfig
    from lib.families.scrapbook import generate
    from lib.io import MANIFEST_KEYS, load_dataset_info, save_dataset
    from lib.stages.scrapbook import ScrapbookConfig

    scrapbook = config.resolve(ScrapbookConfig, "demo").cfg
    drawn = tmp / "fresh"
    generate(scrapbook.set_params("fresh"), drawn, progress=False)
    _, sample = load_eval_items(EvalConfig(datasets={"fresh": str(drawn)}, max_items=n, seed=SEED))[
        "fresh"
    ]
    items = list(sample)
    info = {k: v for k, v in load_dataset_info(drawn).items() if k not in MANIFEST_KEYS}
    info.pop("complete", None)
    sets = {}
    for size in (len(items), max(len(items) // 10, 1)):
        folder = tmp / f"questions{size}"
        shutil.copytree(drawn, folder, ignore=shutil.ignore_patterns("items.jsonl"))
        save_dataset(folder, items[:size], info)
        sets[size] = folder
    return sets


def write_job(folder: Path, model: Path, spec: dict, tokens: int, job: Path) -> int:
    """The bare side's job: every question of ``folder`` as stage 06 asks it of ``spec`` (its
    zero-shot request, free decoding, ``tokens``): the chat messages, which the bare loop puts in the
    model's chat template itself (checked here to give stage 06's prompt), and the pictures' paths;
    returns the count."""
    from transformers import AutoProcessor

    from lib.eval.requests import zero_shot
    from lib.eval.settings import EvalConfig
    from lib.io import load_items
    from lib.models.hf_processors import chat_prompt

    cfg = EvalConfig(datasets={"q": str(folder)}, constrain=False, max_new_tokens=tokens, seed=SEED)
    processor = AutoProcessor.from_pretrained(str(model))
    questions = []
    for item in load_items(folder):
        request = zero_shot(cfg, item, folder, spec)
        messages = [  # image parts as the bare placeholders chat templates take
            {
                **m,
                "content": [
                    {"type": p["type"], **({"text": p["text"]} if "text" in p else {})}
                    for p in m["content"]
                ],
            }
            for m in request.messages
        ]
        text = chat_prompt(processor, request.messages)
        if (
            processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            != text
        ):
            raise AssertionError(f"{item.id}: the bare loop's prompt is not stage 06's")
        questions.append({"messages": messages, "images": request.images()})
    job.write_text(
        json.dumps(
            {
                "model": str(model),
                "max_new_tokens": tokens,
                "questions": questions,
                "replies": str(job.with_suffix(".replies.json")),
            }
        )
    )
    return len(questions)


def stage06_command(folder: Path, model: Path, tokens: int, out: Path, batch: int | None) -> list:
    spec = {"backend": "hf", "name": str(model), "question_first": True}
    if batch is not None:
        spec["batch_size"] = batch
    sets = {
        "datasets": {"q": str(folder)},
        "demo_data": False,
        "models": {"m": spec},
        "styles": ["zero_shot"],
        "judge": None,
        "constrain": False,
        "max_new_tokens": tokens,
        "max_items": 0,
    }
    cmd = [sys.executable, "-m", "lib.stages.evaluate", "--profile", "demo", "--out", str(out)]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={json.dumps(value)}"]
    return cmd


def run_side(side: str, folder: Path, model: Path, tokens: int, job: Path, work: Path) -> tuple:
    """One run of one side: its seconds, process start to exit, and its replies in question order."""
    if side == "bare":
        seconds = _timed(
            [sys.executable, "-m", "benchmarks.overhead", "bare", str(job)], _env(bare=True)
        )
        return seconds, json.loads(job.with_suffix(".replies.json").read_text())
    outputs = Path(tempfile.mkdtemp(dir=work))  # a fresh call cache
    out = outputs / "06_evaluate"
    batch = 1 if side == "stage06" else None
    seconds = _timed(stage06_command(folder, model, tokens, out, batch), _env(outputs))
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    by_id = {r["item_id"]: r["raw"] for r in rows}
    ids = [json.loads(line)["id"] for line in (folder / "items.jsonl").read_text().splitlines()]
    return seconds, [by_id[i] for i in ids]


def demo_student() -> dict:
    """The demo profile's student (``params/common.demo.yaml``): what stage 05 trains, untrained."""
    from lib.config import load_profile

    return dict(load_profile("demo").models["student"])


def answers(
    kind: str, label: str, model: Path, tokens: int, sets: dict, tmp: Path, spec: dict
) -> dict:
    """Every side on the ``N`` questions and their tenth, ``REPEATS`` times in turn; ``spec``: the
    student's model spec (its prompt order and chat template)."""
    work = tmp / kind
    work.mkdir()
    jobs = {n: work / f"job{n}.json" for n in sets}
    for n, folder in sets.items():
        write_job(folder, model, spec, tokens, jobs[n])
    seconds = {side: {n: [] for n in sets} for side in SIDES}
    mismatches = {side: 0 for side in SIDES[1:]}  # the most of any one run
    for _ in range(REPEATS):
        for n, folder in sets.items():
            replies = {}
            for side in SIDES:
                s, replies[side] = run_side(side, folder, model, tokens, jobs[n], work)
                seconds[side][n].append(round(s, 2))
            for side in SIDES[1:]:
                differ = sum(a != b for a, b in zip(replies[side], replies["bare"], strict=True))
                mismatches[side] = max(mismatches[side], differ)
    if mismatches["stage06"]:
        raise AssertionError(
            f"{kind}: stage 06 at batch 1 replied otherwise than the bare loop on "
            f"{mismatches['stage06']} question(s)"
        )
    big, small = max(sets), min(sets)
    result = {"model": label, "max_new_tokens": tokens, "items": [big, small]}
    for side in SIDES:
        med = {n: statistics.median(seconds[side][n]) for n in sets}
        result[side] = {
            "end_to_end_s": round(med[big], 2),
            "per_item_ms": round(1000 * (med[big] - med[small]) / (big - small), 2),
            "seconds": {str(n): seconds[side][n] for n in sets},
        }
    for side, key in (("stage06", ""), ("stage06_batched", "batched_")):
        for figure in ("end_to_end", "per_item"):
            unit = "end_to_end_s" if figure == "end_to_end" else "per_item_ms"
            result[f"{key}{figure}_ratio"] = round(result[side][unit] / result["bare"][unit], 3)
    result["mismatches"] = mismatches["stage06"]
    result["batched_mismatches"] = mismatches["stage06_batched"]
    return result


def main(argv: list[str] | None = None) -> dict:
    import argparse

    from benchmarks.records import host_state, record
    from lib.models.tiny import tiny_vlm_path

    ap = argparse.ArgumentParser(prog="python -m benchmarks.overhead")
    ap.add_argument("--n", type=int, default=N_ITEMS, help="questions per run (and a tenth)")
    ap.add_argument("--trained", help="a folder stage 05 trained (default: train it here)")
    args = ap.parse_args(argv if argv is not None else [])
    before = host_state()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sets = question_sets(tmp, args.n)
        trained = Path(args.trained) if args.trained else trained_model(tmp / "train")
        spec = demo_student()
        options = {k: spec[k] for k in ("image_size", "patch")}
        student = tiny_vlm_path(spec["name"], 0, **options)
        result = {
            "setup": {"questions": max(sets), "repeats": REPEATS, "trained_here": not args.trained},
            "short": answers("short", "trained", trained, SHORT_TOKENS, sets, tmp, spec),
            "long": answers("long", "student", student, LONG_TOKENS, sets, tmp, spec),
        }
    return record("overhead", result, before, TARGETS)


if __name__ == "__main__":
    if sys.argv[1:2] == ["bare"]:
        bare(sys.argv[2])
    else:
        main(sys.argv[1:])
