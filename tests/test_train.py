"""Training: splits by image, answer-only labels, LoRA targets, resume equality, bad images, OOM advice."""

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from lib.config import ParamsError
from lib.models.hf_processors import is_encoder_decoder
from lib.models.tiny import TINY_KINDS
from lib.stages.train import TrainConfig
from lib.training.data import collate, load_examples, split_by_image
from lib.training.loop import TrainingInterrupted, _oom_message, train
from lib.training.model import prepare_model

TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}


@pytest.fixture
def dataset(training_scenes):
    return training_scenes  # tests/conftest.py


def _cfg(dataset, **kw):
    base = dict(
        model=TINY,
        dataset=str(dataset),
        full_finetune=True,
        lr=1e-3,
        warmup_steps=2,
        max_steps=6,
        batch_size=4,
        eval_every=3,
        eval_items=16,
        checkpoint_every=2,
        seed=1,
    )
    return TrainConfig(**{**base, **kw})


def test_splits_are_disjoint_by_image_and_deterministic():
    images = [f"img{i % 50}" for i in range(500)]
    a = split_by_image(images, 0.2, 0.2, seed=0)
    assert a == split_by_image(images, 0.2, 0.2, seed=0) and a != split_by_image(
        images, 0.2, 0.2, seed=1
    )
    assert sorted(list(a.values()).count(s) for s in ("train", "val", "test")) == [10, 10, 30]


def test_examples_never_share_an_image_across_splits(dataset):
    data, report = load_examples(_cfg(dataset))
    images = {k: {e.image for e in v} for k, v in data.items()}
    assert (
        not images["train"] & images["val"]
        and not images["train"] & images["test"]
        and not images["val"] & images["test"]
    )
    assert all(e.item.meta["level"] == 1 for e in data["test"] + data["val"])
    assert report["train_examples"] == len(data["train"]) > 0


def test_loss_is_on_the_answer_tokens_only(dataset):
    data, _ = load_examples(_cfg(dataset))
    from lib.models import load_model

    backend = load_model(TINY).load()
    tok = backend.processor.tokenizer
    batch = collate(data["train"][:3], backend.processor, tok.eos_token)
    for i, e in enumerate(data["train"][:3]):
        labelled = batch["labels"][i][batch["labels"][i] != -100].tolist()
        assert tok.decode(labelled) == e.answer + tok.eos_token
        n = int(batch["attention_mask"][i].sum())
        assert (
            batch["attention_mask"][i][:n].all() and not batch["attention_mask"][i][n:].any()
        )  # right padded
        assert (
            batch["input_ids"][i][n - len(labelled) : n].tolist() == labelled
        )  # answer ends the sequence


def test_collate_makes_each_prompt_once_per_chat_template(dataset, monkeypatch):
    """A question's chat prompt is rendered once per text and template: the same questions again
    render nothing and give the same batch; a changed template is rendered anew."""
    from lib.models import load_model
    from lib.training import data as training_data

    processor = load_model(TINY).load().processor
    examples, eos = load_examples(_cfg(dataset))[0]["train"][:4], processor.tokenizer.eos_token
    rendered, real = [], training_data.chat_prompt
    monkeypatch.setattr(training_data, "chat_prompt", lambda *a: rendered.append(a) or real(*a))
    first = collate(examples, processor, eos)
    made = len(rendered)
    again = collate(examples, processor, eos)
    assert 0 < made <= 4 and len(rendered) == made
    assert all(torch.equal(again[k], first[k]) for k in first)
    monkeypatch.setattr(
        processor, "chat_template", processor.chat_template.replace("}}\n", "}}:\n")
    )
    changed = collate(examples, processor, eos)
    assert (
        len(rendered) == 2 * made and changed["input_ids"].tolist() != first["input_ids"].tolist()
    )


def test_lora_targets_the_language_model_only():
    cfg = TrainConfig(
        model=TINY, dataset="stage:04_scrapbook/datasets/scrapbook", full_finetune=False
    )
    model, _, info = prepare_model(cfg)
    assert info["mode"] == "lora" and info["trainable"] < 0.2 * info["total"]
    assert info["target_modules"] and all("language_model" in n for n in info["target_modules"])
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(
        "lora_" in n and "vision" not in n and "projector" not in n for n in trainable
    )


def test_resumed_run_matches_an_uninterrupted_one(dataset, tmp_path):
    full = train(_cfg(dataset), tmp_path / "full", progress=False)
    with pytest.raises(TrainingInterrupted):
        train(_cfg(dataset), tmp_path / "killed", progress=False, stop_after=4)
    resumed = train(_cfg(dataset), tmp_path / "killed", progress=False)
    assert full["steps"] == resumed["steps"] == 6
    a = [json.loads(x) for x in (tmp_path / "full" / "curve.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (tmp_path / "killed" / "curve.jsonl").read_text().splitlines()]
    assert [r["step"] for r in b] == list(range(1, 7))
    assert [r["loss"] for r in b] == pytest.approx([r["loss"] for r in a], abs=1e-5)
    from safetensors.torch import load_file

    wa, wb = (
        load_file(tmp_path / "full" / "last" / "model.safetensors"),
        load_file(tmp_path / "killed" / "last" / "model.safetensors"),
    )
    assert all(torch.allclose(wa[k], wb[k], atol=1e-5) for k in wa)


def test_unreadable_training_image_is_skipped_and_reported(dataset, tmp_path):
    import shutil

    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    victim = sorted((copy / "images").iterdir())[0]
    victim.write_bytes(b"")
    data, report = load_examples(_cfg(copy))
    assert (
        list(report["skipped_images"]) == [f"images/{victim.name}"] and report["skipped_items"] > 0
    )
    assert all(not e.image.endswith(victim.name) for part in data.values() for e in part)


def test_out_of_memory_message_names_the_settings_to_change():
    msg = _oom_message(
        TrainConfig(dataset="stage:04_scrapbook/datasets/scrapbook", batch_size=32, grad_accum=1)
    )
    assert "batch_size=32" in msg and "grad_accum" in msg and "gradient checkpointing" in msg


def test_out_of_memory_during_training_is_re_raised_with_advice(dataset, tmp_path, monkeypatch):
    from lib.models.hf import HFModel

    real_load = HFModel._load

    def load_then_break(self):
        real_load(self)

        def oom(*args, **kwargs):
            raise torch.OutOfMemoryError("CUDA out of memory")

        self.model.forward = oom

    monkeypatch.setattr(HFModel, "_load", load_then_break)
    with pytest.raises(torch.OutOfMemoryError, match="lower batch_size"):
        train(_cfg(dataset), tmp_path / "oom", progress=False)


def test_training_filters_touch_the_train_split_only(dataset):
    data, _ = load_examples(_cfg(dataset, train_types=["presence"], train_targets=["color"]))
    assert data["train"] and all(
        e.item.meta["type"] == "presence" and set(e.item.meta["query"]["target"]) == {"color"}
        for e in data["train"]
    )
    assert {e.item.meta["type"] for e in data["test"]} == {"presence", "counting"}
    assert {tuple(sorted(e.item.meta["query"]["target"])) for e in data["test"]} == {
        ("color",),
        ("shape",),
    }


def test_a_filter_applies_to_the_facets_an_item_has():
    """types / groups / forms filter on what an item's task says of it (Task.facets): a MemeQA
    question is filtered by its question type, never by the form it has not; empty keeps all."""
    from lib.core.schema import Item
    from lib.tasks.registry import get_task
    from lib.training.data import _kept

    mcq = get_task("mcq").make_item("m", ["a.png"], "?", [0], ["x", "y"], specific_type="Intent")
    scene = {
        "type": "presence",
        "group": "np",
        "form": "original",
        "level": 1,
        "target": "color",
        "absurd": False,
    }
    cfg = _cfg("unused", types=["presence"], groups=["np"], forms=["original"])
    assert get_task("mcq").facets(mcq) == {"type": "Intent"} and not _kept(
        cfg, get_task("mcq").facets(mcq)
    )
    assert _kept(replace(cfg, types=["Intent"]), {"type": "Intent"}) and _kept(
        replace(cfg, types=[]), {"type": "Intent"}
    )
    assert (
        _kept(cfg, scene)
        and not _kept(cfg, {**scene, "form": "negated"})
        and not _kept(cfg, {**scene, "absurd": True})
    )
    assert _kept(
        cfg,
        get_task("vqa.open").facets(
            Item(id="v", task="vqa.open", question="?", images=["a.png"], answer=["x"])
        ),
    )


def test_balanced_drawing_makes_every_answer_of_a_type_as_likely_and_keeps_the_types_shares(
    dataset,
):
    """balance: true draws each answer of a question type equally often (the answer prior teaches
    nothing), each type as often as the data has it."""
    from collections import Counter

    from lib.training.data import answer_balance

    data, _ = load_examples(_cfg(dataset))
    train = data["train"]
    p = answer_balance(train)
    assert p.sum() == pytest.approx(1.0)
    by_answer, by_type = Counter(), Counter()
    for e, q in zip(train, p):
        by_answer[(e.item.meta["type"], e.answer)] += q
        by_type[e.item.meta["type"]] += q
    natural = Counter(e.item.meta["type"] for e in train)
    assert natural["presence"] and natural["counting"]
    for t in natural:
        assert by_type[t] == pytest.approx(natural[t] / len(train))
        shares = [v for (tt, _), v in by_answer.items() if tt == t]
        assert len(shares) > 1 and shares == pytest.approx([by_type[t] / len(shares)] * len(shares))
    skewed = Counter(e.answer for e in train if e.item.meta["type"] == "presence")
    assert skewed["yes"] != skewed["no"]  # the data itself is not balanced: the weights do it


def test_curriculum_trains_on_the_focus_questions_first(dataset, tmp_path, monkeypatch):
    from lib.training import loop

    seen = []
    real = loop.collate

    def spy(examples, *args, **kwargs):
        seen.append({e.facets["target"] for e in examples})
        return real(examples, *args, **kwargs)

    monkeypatch.setattr(loop, "collate", spy)
    cfg = _cfg(dataset, focus_targets=["color"], focus_steps=3, train_types=["presence"])
    train(cfg, tmp_path / "curriculum", progress=False)
    assert all(kinds == {"color"} for kinds in seen[:3]) and any(
        kinds != {"color"} for kinds in seen[3:]
    )


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_every_vlm_family_trains_lora_on_answer_only_labels_and_its_loss_goes_down(dataset, kind):
    """Decoder-only and encoder-decoder families alike: LoRA on the language model's Linear layers
    (never the vision tower, the projector or lm_head), labels on the answer tokens only, and a few
    steps on one batch lower its loss."""
    spec = {"backend": "tiny", "name": kind}
    data, _ = load_examples(_cfg(dataset))
    model, processor, info = prepare_model(
        TrainConfig(model=spec, dataset=str(dataset), lora_r=8, lora_alpha=16)
    )
    assert info["mode"] == "lora" and info["target_modules"]
    assert not any(
        k in n
        for n in info["target_modules"]
        for k in ("vision", "projector", "projection", "qformer", "lm_head", "visual", "connector")
    )
    tok = processor.tokenizer
    encdec = is_encoder_decoder(model)
    assert encdec == kind.endswith(("_t5", "florence2"))
    examples = data["train"][:2]
    batch = collate(examples, processor, tok.eos_token, encoder_decoder=encdec)
    for i, e in enumerate(examples):
        labelled = batch["labels"][i][batch["labels"][i] != -100].tolist()
        assert (
            tok.decode(labelled) == e.answer + tok.eos_token
        )  # the answer (+ end of turn) and nothing else
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-3)
    losses = []
    for _ in range(6):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


@pytest.mark.parametrize("kind", ["qwen2_vl", "blip2_t5"])
def test_other_vlm_families_run_the_training_stage(dataset, tmp_path, kind):
    spec = {"backend": "tiny", "name": kind}
    summary = train(
        TrainConfig(
            model=spec,
            dataset=str(dataset),
            full_finetune=False,
            max_steps=2,
            batch_size=2,
            eval_every=2,
            eval_items=4,
            checkpoint_every=2,
        ),
        tmp_path / kind,
        progress=False,
    )
    assert (
        summary["steps"] == 2
        and summary["model"]["mode"] == "lora"
        and (tmp_path / kind / "best").is_dir()
    )


def test_the_command_line_writes_the_stage_outputs_with_summary_and_provenance(dataset, tmp_path):
    """`python -m lib.stages.train` is the whole stage: training, the comparison, figures, summary, provenance."""
    import subprocess
    import sys

    import yaml

    run_folder = tmp_path / "run"
    (run_folder / "04_scrapbook" / "datasets").mkdir(parents=True)
    (run_folder / "04_scrapbook" / "datasets" / "scrapbook").symlink_to(dataset)
    params = tmp_path / "05.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "model": TINY,
                "dataset": "stage:04_scrapbook/datasets/scrapbook",
                "full_finetune": True,
                "max_steps": 2,
                "batch_size": 2,
                "eval_every": 2,
                "eval_items": 4,
                "checkpoint_every": 2,
                "max_test": 8,
            }
        )
    )
    out = run_folder / "05_train"
    r = subprocess.run(
        [sys.executable, "-m", "lib.stages.train", "--params", str(params), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["training"]["steps"] == 2
        and summary["n_test"] > 0
        and set(summary["trained"]) >= {"accuracy"}
    )
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["stage"] == "05_train" and provenance["params"]["dataset"] == str(
        run_folder / "04_scrapbook" / "datasets" / "scrapbook"
    )
    assert {"best", "last", "checkpoint", "curve.csv", "figures"} <= {p.name for p in out.iterdir()}
    again = subprocess.run(
        [sys.executable, "-m", "lib.stages.train", "--params", str(params), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (
        again.returncode == 0 and "resumed from" in again.stdout
    )  # same settings: the finished run resumes
    params.write_text(params.read_text().replace("max_steps: 2", "max_steps: 3"))
    changed = subprocess.run(
        [sys.executable, "-m", "lib.stages.train", "--params", str(params), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (
        changed.returncode != 0
        and "other training settings (max_steps: 2 there, 3 here)" in changed.stderr
    )  # never a silent mix


def test_a_budget_that_ends_before_the_first_validation_still_validates_and_saves_best(
    dataset, tmp_path
):
    """A time cap hit before the first scheduled validation (a slow or busy machine): the stage still
    ends with a validation row and a best/ that the comparison can load."""
    from lib.stages.train import compare

    cfg = _cfg(dataset, max_steps=50, eval_every=40, checkpoint_every=40, max_seconds=1e-9)
    summary = train(cfg, tmp_path / "short", progress=False)
    assert summary["steps"] == 1  # the cap stopped it after one step, long before step 40
    rows = [json.loads(x) for x in (tmp_path / "short" / "curve.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 1] and "val_accuracy" in rows[-1]
    assert (tmp_path / "short" / "best").is_dir() and summary["best_val_accuracy"] >= 0
    assert compare(replace(cfg, max_test=8), tmp_path / "short")["n_test"] == 8


def test_the_same_step_budget_gives_the_same_model_whatever_the_machine_speed(dataset, tmp_path):
    """Budgets are steps: two runs of the same config agree exactly (the demo's numbers do not depend
    on how busy the machine is)."""
    a = train(_cfg(dataset), tmp_path / "a", progress=False)
    b = train(_cfg(dataset), tmp_path / "b", progress=False)
    curve = lambda p: [
        (r["step"], r["loss"], r.get("val_accuracy"))
        for r in map(json.loads, (p / "curve.jsonl").read_text().splitlines())
    ]
    assert a["steps"] == b["steps"] == 6 and curve(tmp_path / "a") == curve(tmp_path / "b")


CURVE = Path(__file__).parent / "snapshots" / "train_curve.json"
# long enough for validation to move: answers start right between steps 6 and 12 (0, 0, .125, .375 ...), so
# the exact comparison of validation scores compares numbers that can differ
SIGNAL = {"max_steps": 18, "checkpoint_every": 6}


def test_a_short_training_gives_the_recorded_curve_on_any_machine(dataset, tmp_path):
    """The demo's numbers depend on the seed only: eighteen steps of the tiny LLaVA from its seeded
    random weights give the recorded losses, learning rates and validation scores (tests/snapshots/
    train_curve.json, written by this test with UPDATE_SNAPSHOTS=1), and the validation scores have
    signal: not all equal, some above zero (a curve of zeros would compare 0 with 0).

    Tolerance: losses within a relative 1e-3. Another CPU (SIMD width) or thread count sums the same
    floats in another order, which moves a loss by ~1e-7 relative (the 2-process test sees that
    size); eighteen Adam steps carry it below 1e-5, a hundredth of the tolerance. Validation scores
    are compared exactly: they are counts of greedy answers, and only a near-tie between two tokens'
    logits (closer than those ~1e-5) could flip one; the message says so if that happens."""
    train(_cfg(dataset, **SIGNAL), tmp_path / "run", progress=False)
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "curve.jsonl").read_text().splitlines()
    ]
    got = [{k: v for k, v in r.items() if k != "train_seconds"} for r in rows]
    accuracy = [r["val_accuracy"] for r in got if "val_accuracy" in r]
    assert len(accuracy) == 6 and len(set(accuracy)) > 1 and max(accuracy) > 0, (
        f"validation accuracy {accuracy} has no signal: the exact comparison below would compare constants"
    )
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        CURVE.write_text(json.dumps(got, indent=1) + "\n")
    want = json.loads(CURVE.read_text())
    assert [r["step"] for r in got] == [r["step"] for r in want]
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        assert g["loss"] == pytest.approx(w["loss"], rel=1e-3) and g["lr"] == pytest.approx(
            w["lr"], rel=1e-6
        )
        scores = {k: v for k, v in g.items() if k.startswith("val_")}
        assert scores == {k: w[k] for k in scores}, (
            f"step {g['step']}: validation differs from the recorded run although the losses agree "
            f"(relative {abs(g['loss'] - w['loss']) / w['loss']:.1e}): a greedy answer flipped on a near-tie"
        )


def test_a_kill_between_checkpoints_leaves_no_duplicate_curve_rows(dataset, tmp_path, monkeypatch):
    """Killed after step 5 (checkpoints at 2, 4, 6): the resumed run trains step 5 again from the
    step-4 checkpoint, and the curve lists every step once."""
    from lib.training import loop

    real = loop.append_jsonl

    def killed_after_step_5(path, rows):
        n = real(path, rows)
        if rows and rows[-1].get("step") == 5:
            raise KeyboardInterrupt("killed")
        return n

    monkeypatch.setattr(loop, "append_jsonl", killed_after_step_5)
    with pytest.raises(KeyboardInterrupt):
        train(_cfg(dataset), tmp_path / "k", progress=False)
    monkeypatch.setattr(loop, "append_jsonl", real)
    train(_cfg(dataset), tmp_path / "k", progress=False)
    steps = [
        json.loads(x)["step"] for x in (tmp_path / "k" / "curve.jsonl").read_text().splitlines()
    ]
    assert steps == [1, 2, 3, 4, 5, 6]
    import pandas as pd

    assert pd.read_csv(tmp_path / "k" / "curve.csv")["step"].tolist() == steps


def _memeqa_splits(root, per_split=6):
    """Three MemeQA-format JSON splits (disjoint images, stand-in pictures) over three types, single
    and multi-answer, as the release's files are laid out."""
    from PIL import Image

    (root / "images").mkdir(parents=True)
    kinds = [
        ("intent_id", "Intent Identification", "single"),
        ("viz_id", "Visual Identification", "multi"),
        ("cond_sent_id", "Conditional Sentiment Identification", "single"),
    ]
    paths = {}
    for s, split in enumerate(("train", "dev", "test")):
        rows = []
        for i in range(per_split):
            img = f"{split}_{i}.png"
            Image.new("RGB", (40, 40), ("red", "green", "blue")[i % 3]).save(root / "images" / img)
            kind, specific, general = kinds[i % 3]
            options = (
                [
                    "The meme mocks cats",
                    "The meme praises dogs",
                    "The meme is about rain",
                    "None of the above",
                ]
                if kind != "cond_sent_id"
                else ["Positive", "Neutral", "Negative"]
            )
            key = (i + s) % len(options) if general == "single" else [1, 0, 1, 0]
            rows.append(
                {
                    "id": f"{kind}/{split}{i}",
                    "img": img,
                    "question": f"Question {i} about the meme?",
                    "options": options,
                    "general_type": general,
                    "specific_type": specific,
                    "answer_key": key,
                }
            )
        paths[split] = root / f"{split}.json"
        paths[split].write_text(json.dumps(rows))
    return paths


def test_multiple_choice_training_uses_the_datasets_splits_options_letters_and_the_macro_metric(
    tmp_path,
):
    from lib.tasks.registry import task_of

    paths = _memeqa_splits(tmp_path / "memeqa")
    cfg = TrainConfig(
        model=TINY,
        dataset=str(paths["train"]),
        val_dataset=str(paths["dev"]),
        test_dataset=str(paths["test"]),
        memeqa_images=str(tmp_path / "memeqa" / "images"),
        lr=1e-3,
        max_steps=4,
        batch_size=2,
        eval_every=2,
        eval_items=6,
        checkpoint_every=4,
        full_finetune=True,
        val_max_new_tokens=6,
    )
    data, report = load_examples(cfg)
    assert report["splits"] == "the dataset's own" and [
        len(data[k]) for k in ("train", "val", "test")
    ] == [6, 6, 6]
    assert {e.image.split("/")[-1].split("_")[0] for e in data["val"]} == {
        "dev"
    }  # the dev file is validation
    multi = next(e for e in data["train"] if e.item.meta["general_type"] == "multi")
    assert multi.answer == "A, C"  # a letter set, as the evaluation reads it
    single = next(e for e in data["train"] if e.item.meta["general_type"] == "single")
    assert single.answer in "ABCD" and len(single.answer) == 1
    prompt = task_of(single.item).prompt(single.item, single.root).text
    assert (
        all(o in prompt for o in single.item.options) and "A. " in prompt
    )  # the options are in the prompt
    from lib.models import load_model

    backend = load_model(TINY).load()
    batch = collate([multi], backend.processor, backend.processor.tokenizer.eos_token)
    labelled = batch["labels"][0][batch["labels"][0] != -100].tolist()
    assert (
        backend.processor.tokenizer.decode(labelled)
        == "A, C" + backend.processor.tokenizer.eos_token
    )
    summary = train(cfg, tmp_path / "out", progress=False)
    assert summary["selected_by"] == "macro"  # MemeQA picks its checkpoint by the macro over types
    curve = [
        json.loads(line) for line in Path(tmp_path / "out" / "curve.jsonl").read_text().splitlines()
    ]
    assert any("val_macro" in r for r in curve) and (tmp_path / "out" / "best").is_dir()
    leaking = tmp_path / "leak.json"
    leaking.write_text(paths["train"].read_text())
    with pytest.raises(ValueError, match="must not share images"):
        load_examples(
            TrainConfig(
                model=TINY,
                dataset=str(paths["train"]),
                val_dataset=str(leaking),
                test_dataset=str(paths["test"]),
                memeqa_images=cfg.memeqa_images,
            )
        )


def test_an_epoch_budget_and_the_originals_constant_learning_rate(dataset, tmp_path):
    cfg = _cfg(
        dataset,
        epochs=0.5,
        lr_schedule="constant",
        warmup_steps=0,
        eval_every=100,
        checkpoint_every=100,
    )
    data, _ = load_examples(cfg)
    summary = train(cfg, tmp_path / "e", progress=False)
    assert summary["steps"] == int(np.ceil(0.5 * len(data["train"]) / cfg.batch_size))
    lrs = {
        round(json.loads(line)["lr"], 9)
        for line in Path(tmp_path / "e" / "curve.jsonl").read_text().splitlines()
    }
    assert lrs == {cfg.lr}


def test_the_image_cache_trains_the_same_model_without_decoding_images_again(dataset, tmp_path):
    cached = train(
        _cfg(dataset, max_steps=4, eval_every=100, checkpoint_every=100),
        tmp_path / "c",
        progress=False,
    )
    plain = train(
        _cfg(dataset, max_steps=4, eval_every=100, checkpoint_every=100, image_cache_mb=0),
        tmp_path / "p",
        progress=False,
    )
    loss = lambda d: [
        json.loads(line)["loss"]
        for line in Path(tmp_path / d / "curve.jsonl").read_text().splitlines()
    ]
    assert loss("c") == loss("p")  # the same pixels, the same batches: the same training
    info = cached["image_cache"]
    assert (
        0 < info["misses"] <= len({e.image for e in load_examples(_cfg(dataset))[0]["train"]})
    )  # each image decoded once
    assert (
        info["hits"] > 0 and info["hits"] + info["misses"] == 4 * 4 and plain["image_cache"] is None
    )
    assert (
        cached["image_tensors"]["active"]
        and cached["image_tensors"]["hits"] > 0
        and plain["image_tensors"] is None
    )


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_prepared_image_tensors_give_every_family_the_processors_own_batches(dataset, kind):
    """Per-image processor outputs are reused only where concatenating them is what the processor
    computes (checked on the first batch); every family's batches equal the plain ones."""
    from lib.models.hf_images import ImageTensors

    _, processor, _ = prepare_model(
        TrainConfig(model={"backend": "tiny", "name": kind}, dataset=str(dataset))
    )
    train_set = load_examples(_cfg(dataset))[0]["train"]
    tensors, eos = ImageTensors(64), processor.tokenizer.eos_token
    encdec = kind.endswith(("_t5", "florence2"))
    for batch in (train_set[:3], train_set[1:4], train_set[:3]):
        want = collate(batch, processor, eos, encoder_decoder=encdec)
        got = collate(batch, processor, eos, encoder_decoder=encdec, image_tensors=tensors)
        assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in want)
    assert tensors.active is not None
    assert kind != "llava" or tensors.active


def test_prepared_image_tensors_hash_an_image_object_once(dataset, monkeypatch):
    """A decoded image the model keeps is hashed at its first use only; a new object with the same
    pixels is hashed again and finds the same tensors."""
    import hashlib

    from lib.io import ImageCache
    from lib.models.hf_images import ImageTensors

    _, processor, _ = prepare_model(
        TrainConfig(model={"backend": "tiny", "name": "llava"}, dataset=str(dataset))
    )
    example = load_examples(_cfg(dataset))[0]["train"][0]
    images, tensors = ImageCache(64), ImageTensors(64)
    hashed = []
    real = hashlib.blake2b
    monkeypatch.setattr(hashlib, "blake2b", lambda *a, **k: hashed.append(1) or real(*a, **k))
    first = tensors._one(
        processor.image_processor, images(dataset / example.image), {"return_tensors": "pt"}
    )
    again = tensors._one(
        processor.image_processor, images(dataset / example.image), {"return_tensors": "pt"}
    )
    assert len(hashed) == 1 and again is first
    copy = images(dataset / example.image).copy()
    assert (
        tensors._one(processor.image_processor, copy, {"return_tensors": "pt"}) is first
        and len(hashed) == 2
    )


def test_the_stage_steps_called_one_by_one_write_what_run_writes(dataset, tmp_path):
    """Notebook 05 calls the steps one per section; ``run`` composes the same steps."""
    from lib.stages import train as train_stage

    cfg = _cfg(dataset, max_test=8)
    a, b = tmp_path / "steps" / "05_train", tmp_path / "run" / "05_train"
    bound = train_stage.bind_datasets(cfg, a)
    assert bound.dataset == str(dataset)  # a folder named outright stays as it is
    training = train_stage.train(bound, a, resume=bound.resume, progress=False)
    curve, (fig, ax) = train_stage.curve(a)
    assert (
        curve["step"].max() == training["steps"]
        and fig.axes
        and (a / "figures" / "training_curve.png").exists()
    )
    result, (fig, ax) = train_stage.comparison(bound, a)
    assert result["n_test"] == 8 and fig.axes and (a / "figures" / "base_vs_trained.png").exists()
    summary = train_stage.finish(bound, a, training, result)
    ran = train_stage.run(cfg, b, progress=False)

    def untimed(s):
        return {
            k: untimed(v) if isinstance(v, dict) else v
            for k, v in s.items()
            if k not in ("train_seconds", "tokens_per_second")
        }

    assert untimed(summary) == untimed(ran) and list(summary) == list(ran)
    assert sorted(p.relative_to(a) for p in a.rglob("*")) == sorted(
        p.relative_to(b) for p in b.rglob("*")
    )


def test_cpu_threads_sets_the_threads_training_sums_with(dataset, tmp_path):
    """A sum over another number of threads rounds differently (losses move by ~1e-7 relative), so
    ``cpu_threads`` fixes torch's threads for the run, whatever the machine's default."""
    default = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        train(
            _cfg(dataset, max_steps=2, eval_every=10, cpu_threads=2), tmp_path / "a", progress=False
        )
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(default)
    with pytest.raises(ParamsError, match="cpu_threads must be 0"):
        _cfg(dataset, cpu_threads=-1).check("p.yaml")


def test_openmp_spins_briefly_only_where_the_cores_are_shared():
    """``lib`` chooses OpenMP's spin by the tasks runnable beside the process: libgomp's own (unset)
    alone, the short one beside any other, and the short one where it cannot tell."""
    import lib

    assert lib.openmp_spin(0) is None
    assert lib.openmp_spin(1) == lib.openmp_spin(7) == lib.openmp_spin(None) == lib.SHORT_SPIN
    assert lib.others_running() >= 0  # this machine's /proc/loadavg reads


def _spin_seen(env: dict) -> tuple[str, str]:
    import subprocess
    import sys

    code = (
        "import lib, os, sys; assert 'torch' not in sys.modules; "
        "print(os.environ.get('GOMP_SPINCOUNT', '-'), os.environ.get(lib.SPIN_MARK, '-'))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return tuple(out.stdout.split())


def test_openmp_spin_is_chosen_before_torch_loads_and_a_users_value_wins():
    """Beside a busy process ``import lib`` sets the short spin, marked as its own, before torch
    loads libgomp (which reads it then); a child given that mark chooses anew; a value the user set
    is kept."""
    import subprocess
    import sys

    import lib

    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", lib.SPIN_MARK)}
    busy = subprocess.Popen(
        [sys.executable, "-c", "print(flush=True)\nwhile True: pass"], stdout=subprocess.PIPE
    )
    try:
        busy.stdout.readline()  # it runs
        assert _spin_seen(env) == (lib.SHORT_SPIN, lib.SHORT_SPIN)
        # a parent's choice is remade (here beside the same busy process: the same)
        assert (
            _spin_seen(env | {"GOMP_SPINCOUNT": "77", lib.SPIN_MARK: "77"}) == (lib.SHORT_SPIN,) * 2
        )
        assert _spin_seen(env | {"GOMP_SPINCOUNT": "300000"}) == ("300000", "-")
    finally:
        busy.kill()
        busy.wait()
