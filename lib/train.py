"""Stage 05 · Train: LoRA (peft) or full fine-tuning of a VLM on a project dataset, with
generation-based validation on the task's own metric, checkpoints and exact resume.

    run(TrainConfig(dataset=...), out)                    # what notebook 05 does: train, compare, figures
    python -m lib.train --profile demo          # -> outputs/demo/05_train
    torchrun --nproc_per_node N -m lib.train --params FILE --out DIR      # N processes (or accelerate launch)

Prompts, targets, answer reading and scoring are the items' tasks' (:mod:`lib.families`): training
learns :meth:`Task.target_text` after :meth:`Task.prompt`, and validation asks, reads and scores
exactly as stage 06 does.

Why an explicit loop on ``accelerate`` rather than transformers' ``Trainer`` (both tried: a Trainer
run with this module's ``collate`` and a callback calling :func:`evaluate_examples` trains fine):
validation here is *generation* with constrained answers scored by the task's metric, and
Trainer's evaluation loop computes teacher-forced logits, so the metric lives in a callback that
Trainer's best-model selection does not see, next to an evaluation pass we do not need; the
demo's curriculum (switching the training pool at a step) and the stateless batch draws that make
resume exact would fight Trainer's sampler. The explicit loop is a few short functions (:func:`train`
composes them), and ``accelerate`` still gives devices, mixed precision, gradient accumulation,
multi-GPU and checkpoint state.

Batches are drawn *statelessly*: step t's examples come from ``rng(seed, t, micro)``, so a
resumed run sees exactly the batches the uninterrupted run would have seen. Loss is on the answer
tokens only (prompt and image tokens masked with -100); prompts are right-padded during training
so positions match what ``generate`` computes from the attention mask at inference.

Several processes (``torchrun`` / ``accelerate launch``) train data-parallel: ``batch_size`` is per
process, each step's global batch (``batch_size`` x processes) is drawn independently of the rank
and rank r trains on its r-th slice, gradients are averaged by the prepared (DDP) model, so a run
of N processes is the one-process run with ``batch_size`` x N up to float rounding
(``tests/test_scale_out_train.py``). Each rank asks its share of the validation questions and all
score the gathered answers, so every rank takes the same ``best/`` decision; only the main process
writes (``checkpoint/`` apart, where each rank saves its own RNG state).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from lib import artifacts as A
from lib import cli, config, plots
from lib.families.memeqa.importer import import_memeqa
from lib.io import ImageCache, ImageError, append_jsonl, load_image, load_items, read_jsonl, write_json, write_jsonl
from lib.models import check_spec, generate, load_model
from lib.models.hf import HFModel, ImageTensors, chat_prompt, is_encoder_decoder
from lib.ranks import ranks
from lib.schema import Item, Prediction
from lib.eval.score import read_answer, score_group
from lib.families import get_task, task_of
from lib.tasks import Scoring, user_content, wants_question_first

# Where a VLM keeps its language model (LLaVA, Qwen-VL, BLIP-2, Florence-2: language_model; Idefics3,
# Kosmos-2: text_model): LoRA adapts that model's Linear layers unless told otherwise.
LM_SCOPES = ("language_model.", "text_model.")


@dataclass
class TrainConfig(config.StageConfig):
    """Training parameters (all plain values, so a YAML params file maps onto them)."""

    STAGE: ClassVar[str] = A.TRAIN
    MODEL_ROLES: ClassVar[dict] = {"model": "vlm"}

    model: dict = field(default_factory=lambda: {"backend": "tiny", "name": "llava"})
    # a dataset folder (items.jsonl + images/), stage:NN_stage/datasets/<name> of this run, or a MemeQA
    # JSON split (its images in memeqa_images). With val_dataset and test_dataset (same kinds) the
    # dataset's own splits are used (MemeQA's train / dev / test files); otherwise it is split by image.
    dataset: str = ""
    val_dataset: str = ""
    test_dataset: str = ""
    memeqa_images: str = ""  # the images folder of MemeQA JSON splits
    # Scrapbook filters (other datasets train on every item): question types, groups, forms, and the
    # levels validation and test keep
    types: list = field(default_factory=lambda: ["presence", "counting"])
    groups: list = field(default_factory=lambda: ["np"])
    forms: list = field(default_factory=lambda: ["original"])
    eval_levels: list = field(default_factory=lambda: [1])
    # the validation metric that picks best/: "auto" = the task's own (Task.validation_metric: MemeQA's
    # macro average of exact match over its question types for mcq, accuracy otherwise), or by hand
    select_by: str = "auto"
    train_types: list = field(default_factory=list)  # train only on these question types; empty: all of `types`
    train_targets: list = field(default_factory=list)  # train only on questions describing these attributes
    #   (e.g. [color]: colour questions only); empty: all. Validation and test keep every question.
    focus_targets: list = field(default_factory=list)  # curriculum: for the first focus_steps steps, train
    focus_steps: int = 0  # only on questions about these attributes (an easy concept first), then on all
    # draw training questions so that every answer of a question type is equally likely (class-balanced
    # sampling: a model that only learnt the answer prior gains nothing); validation and test keep the
    # data's own answers. False: questions as often as the data has them
    balance: bool = False
    val_fraction: float = 0.1  # of images
    test_fraction: float = 0.1  # of images
    full_finetune: bool = False  # True for randomly initialised models: LoRA on random weights learns little
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: list = field(default_factory=list)  # default: the language model's linear layers
    lr: float = 2e-4
    lr_schedule: str = "cosine"  # cosine (after warmup_steps) or constant (the original MemeQA runs)
    weight_decay: float = 0.0
    warmup_steps: int = 20
    max_steps: int = 200  # the budget: in steps, so a slow or busy machine gives the same model, only later
    epochs: float = 0.0  # > 0: the budget in passes over the training split instead (max_steps derived from it)
    max_seconds: float = 0.0  # a safety net only (0: none): stops early, then still validates and saves best/
    batch_size: int = 16
    grad_accum: int = 1
    max_grad_norm: float = 1.0
    eval_every: int = 50
    eval_items: int = 300  # validation questions per evaluation
    checkpoint_every: int = 50
    mixed_precision: str = "auto"  # auto (bf16 where the GPU has it), no, bf16, fp16
    # torch's threads when training on CPUs (0: torch's default, one per core). A sum split over another
    # number of threads rounds differently, and thousands of steps carry that into the results: a fixed
    # count trains the same model on machines with more or fewer cores
    cpu_threads: int = 0
    val_max_new_tokens: int = 8  # validation decodes like evaluation: free text unless the task has a closed set
    max_test: int = 1000  # held-out questions for the base / trained / majority comparison
    image_cache_mb: int = 1024  # decoded training images kept in memory (least recently used out; 0: decode every step)
    resume: bool = True  # continue from checkpoint/ when it was made with the same settings
    seed: int = 0

    def check(self, source: str) -> None:
        check_spec(self.model, f"{source}: model")
        if not self.dataset:
            raise config.ParamsError(f"{source}: dataset must name a dataset folder (e.g. stage:04_scrapbook/datasets/scrapbook)")
        if bool(self.val_dataset) != bool(self.test_dataset):
            raise config.ParamsError(f"{source}: give both val_dataset and test_dataset (a dataset's own splits) or neither")
        if self.select_by not in ("auto", "accuracy", "macro"):
            raise config.ParamsError(f"{source}: select_by must be auto, accuracy or macro, got {self.select_by!r}")
        if self.cpu_threads < 0:
            raise config.ParamsError(f"{source}: cpu_threads must be 0 (torch's default) or a number of threads, "
                                     f"got {self.cpu_threads}")
        if self.lr_schedule not in ("cosine", "constant"):
            raise config.ParamsError(f"{source}: lr_schedule must be cosine or constant, got {self.lr_schedule!r}")

    def settings(self) -> dict:
        """What a checkpoint must share with the run that resumes it."""
        return {k: v for k, v in asdict(self).items()
                if k not in ("resume", "max_test", "max_seconds", "image_cache_mb", "cpu_threads")}


@dataclass
class Example:
    """One training or validation question: the item and the dataset folder its images are in."""

    item: Item
    root: str

    @property
    def image(self) -> str:
        return str(Path(self.root) / self.item.images[0])

    @property
    def answer(self) -> str:
        """The text the model is trained to produce (the task's target text)."""
        return task_of(self.item).target_text(self.item)

    @property
    def meta(self) -> dict:
        return self.item.meta


# --- data -------------------------------------------------------------------------------------

def split_by_image(image_ids: list[str], val_fraction: float, test_fraction: float, seed: int) -> dict[str, str]:
    """Assign every image to train / val / test (disjoint by image, deterministic for a seed)."""
    unique = sorted(set(image_ids))
    order = np.random.default_rng(seed).permutation(len(unique))
    n_test = round(len(unique) * test_fraction)
    n_val = round(len(unique) * val_fraction)
    split = {}
    for rank, i in enumerate(order):
        split[unique[i]] = "test" if rank < n_test else "val" if rank < n_test + n_val else "train"
    return split


def target_kind(meta: dict) -> str:
    """What a Scrapbook question's target describes: ``color``, ``shape`` or ``color+shape``."""
    target = (meta.get("query") or {}).get("target") or {}
    return "+".join(k for k in ("color", "shape") if k in target) or "object"


def _read_split(source: str, cfg: TrainConfig) -> tuple[list[Item], Path]:
    """Items and the folder their image paths are relative to: a dataset folder, or a MemeQA JSON."""
    path = Path(source)
    if path.suffix == ".json":
        if not cfg.memeqa_images:
            raise ValueError(f"{path}: a MemeQA JSON split needs memeqa_images (the folder of its images)")
        return import_memeqa(path, str(Path(cfg.memeqa_images).resolve())), path.parent
    return load_items(path), path


def _keep(cfg: TrainConfig, it: Item) -> bool:
    """The Scrapbook filters (type, group, form, no absurd questions); other tasks keep every item."""
    if not task_of(it).scene_questions:
        return True
    return it.meta.get("type") in cfg.types and it.meta.get("group") in cfg.groups \
        and it.meta.get("form") in cfg.forms and it.meta.get("absurd") is not True


def question_type(meta: dict) -> str:
    """A question's type for per-type metrics: Scrapbook's meta.type, MemeQA's specific type."""
    return meta.get("type") or meta.get("specific_type") or "all"


def load_examples(cfg: TrainConfig) -> tuple[dict[str, list[Example]], dict]:
    """Examples per split; unreadable images are skipped and counted. The splits are the dataset's
    own when ``val_dataset`` / ``test_dataset`` name them (an image in two of them is an error:
    it would leak), else drawn by image from ``dataset``."""
    sources = {"train": cfg.dataset, "val": cfg.val_dataset, "test": cfg.test_dataset} if cfg.val_dataset \
        else {"all": cfg.dataset}
    parts: dict[str, list[Item]] = {}
    roots: dict[str, Path] = {}
    for part, source in sources.items():
        items, roots[part] = _read_split(source, cfg)
        parts[part] = [it for it in items if _keep(cfg, it)]
        if not parts[part]:
            raise ValueError(f"{source}: no items match types={cfg.types} groups={cfg.groups} forms={cfg.forms}")
    image_of = lambda part, it: str((roots[part] / it.images[0]).resolve())  # noqa: E731
    if "all" in parts:
        split = split_by_image([it.images[0] for it in parts["all"]], cfg.val_fraction, cfg.test_fraction, cfg.seed)
        assigned = [(split[it.images[0]], it, roots["all"]) for it in parts["all"]]
    else:
        seen: dict[str, str] = {}
        for part, items in parts.items():
            for it in items:
                other = seen.setdefault(image_of(part, it), part)
                if other != part:
                    raise ValueError(f"image {it.images[0]} is in both the {other} and the {part} split "
                                     f"({sources[other]}, {sources[part]}): the splits must not share images")
        assigned = [(part, it, roots[part]) for part, items in parts.items() for it in items]
    bad: dict[str, str] = {}  # keyed by the image as the items name it
    for root, name in sorted({(root, it.images[0]) for _, it, root in assigned}):
        try:
            load_image(root / name)
        except ImageError as e:
            bad[name] = str(e)
    out: dict[str, list[Example]] = {"train": [], "val": [], "test": []}
    for part, it, root in assigned:
        if it.images[0] in bad:
            continue
        if part != "train" and task_of(it).scene_questions and it.meta.get("level") not in cfg.eval_levels:
            continue
        if part == "train" and ((cfg.train_targets and set(target_kind(it.meta).split("+")) - set(cfg.train_targets))
                                or (cfg.train_types and it.meta.get("type") not in cfg.train_types)):
            continue
        out[part].append(Example(it, str(root)))
    report = {"items": len(assigned), "splits": "the dataset's own" if cfg.val_dataset else "by image",
              "skipped_images": bad, "skipped_items": sum(it.images[0] in bad for _, it, _ in assigned),
              **{f"{k}_examples": len(v) for k, v in out.items()},
              **{f"{k}_images": len({e.image for e in v}) for k, v in out.items()}}
    return out, report


def collate(examples: list[Example], processor, eos: str, question_first: bool = False,
            encoder_decoder: bool = False, spec: dict | None = None, images=load_image,
            image_tensors: ImageTensors | None = None):
    """Right-padded inputs with labels on the answer tokens (+ end of turn) only. The prompt is the
    task's own (:meth:`Task.prompt`), in the same image/question order and chat template as at
    evaluation (:class:`lib.models.hf.HFModel`'s). An encoder-decoder model reads the prompt with
    its encoder and is trained to decode the answer: ``labels`` are the answer tokens alone."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.train must stay cheap

    tok = processor.tokenizer
    tok.padding_side = "left"
    fmt = (spec or {}).get("prompt_format", "{text}")
    texts = [chat_prompt(processor, [{"role": "user", "content": user_content(
        task_of(e.item).prompt(e.item, e.root).text, [None], question_first)}], fmt) for e in examples]
    pictures = [images(e.image) for e in examples]  # ``images``: a loader, e.g. an ImageCache
    nested = processor.__class__.__name__.startswith(("Idefics", "SmolVLM"))
    with image_tensors.around(processor) if image_tensors is not None else nullcontext():
        enc = processor(text=texts, images=[[im] for im in pictures] if nested else pictures, return_tensors="pt",
                        padding=True)
    answers = [tok.encode(e.answer + eos, add_special_tokens=False) for e in examples]
    if encoder_decoder:
        width = max(map(len, answers))
        enc["labels"] = torch.tensor([a + [-100] * (width - len(a)) for a in answers])
        return dict(enc)
    mask = enc["attention_mask"].bool()
    per_token = [k for k, v in enc.items() if k != "attention_mask" and v.dim() == 2 and v.shape == mask.shape]
    rows = {k: [] for k in per_token}
    labels = []
    for i, ans in enumerate(answers):
        for k in per_token:
            kept = enc[k][i][mask[i]].tolist()
            rows[k].append(kept + (ans if k == "input_ids" else [0] * len(ans)))
        labels.append([-100] * int(mask[i].sum()) + ans)
    width = max(map(len, labels))
    pad = tok.pad_token_id
    batch = {k: torch.tensor([r + [pad if k == "input_ids" else 0] * (width - len(r)) for r in v])
             for k, v in rows.items()}
    batch["attention_mask"] = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in labels])
    batch["labels"] = torch.tensor([r + [-100] * (width - len(r)) for r in labels])
    for k, v in enc.items():
        if k not in batch and k not in per_token:
            batch[k] = v
    return batch


# --- model ------------------------------------------------------------------------------------

def lm_linear_modules(model) -> list[str]:
    """Names of the language model's Linear layers - attention and MLP, whatever the family calls
    them (q_proj / q / query, fc1 / wi_0 / down_proj...), in decoder-only and encoder-decoder
    models alike - leaving out the vision tower, the projector (Q-Former included) and lm_head:
    the original MemeQA setup's "every Linear except the projector, the vision tower and lm_head"."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.train must stay cheap

    names = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and any(scope in name for scope in LM_SCOPES) \
                and not name.endswith("lm_head") and "vision" not in name:
            names.append(name)
    return names


def prepare_model(cfg: TrainConfig, device: str | None = None):
    """Load the model named by the spec and wrap it for training (LoRA unless full fine-tuning).
    ``device``: load it there whole (one copy per process when training data-parallel)."""
    backend = load_model({**cfg.model, "device_map": device} if device else cfg.model).load()
    model, processor = backend.model, backend.processor
    if cfg.full_finetune:
        for p in model.parameters():
            p.requires_grad_(True)
        return model, processor, {"mode": "full", "trainable": sum(p.numel() for p in model.parameters())}
    from peft import LoraConfig, get_peft_model  # deferred on purpose: heavy, and only LoRA needs it

    targets = cfg.target_modules or lm_linear_modules(model)
    if not targets:
        raise ValueError(f"model {cfg.model}: no Linear layers under {LM_SCOPES} (its language model); "
                         f"set target_modules")
    model = get_peft_model(model, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                                             target_modules=targets))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    print(f"LoRA on {len(targets)} modules ({trainable:,} of {total:,} parameters, {100 * trainable / total:.2f}%): "
          f"{', '.join(targets[:6])}{' ...' if len(targets) > 6 else ''}")
    return model, processor, {"mode": "lora", "target_modules": targets, "trainable": trainable, "total": total}


def evaluate_examples(model, processor, examples: list[Example], max_new_tokens: int, batch_size: int = 32,
                      question_first: bool = False, spec: dict | None = None) -> dict:
    """Accuracy per type, with each task's own request, answer reading and scoring - what stage 06
    does (greedy; constrained only where the task has a closed answer set). ``spec``: the model's
    spec, for its prompt_format."""
    responses = ask_examples(model, processor, examples, max_new_tokens, batch_size, question_first, spec)
    return _accuracies(examples, score_examples(examples, responses))


def ask_examples(model, processor, examples: list[Example], max_new_tokens: int, batch_size: int = 32,
                 question_first: bool = False, spec: dict | None = None) -> list:
    """The model's responses to ``examples``, asked as :func:`evaluate_examples` asks them."""
    keep = {k: v for k, v in (spec or {}).items() if k == "prompt_format"}
    wrapper = HFModel.from_loaded(model, processor, {"backend": "hf", "name": "in-training", **keep})
    was_training = model.training
    model.eval()
    try:
        reqs = [task_of(e.item).request(e.item, e.root, question_first=question_first, max_new_tokens=max_new_tokens)
                for e in examples]
        responses = generate(wrapper, reqs, batch_size=batch_size, progress=False)
    finally:
        model.train(was_training)
    return list(responses)


def score_examples(examples: list[Example], responses) -> list[bool]:
    """Is each response right, read and scored as stage 06 reads and scores it (the engine's
    :func:`lib.eval.score.read_answer` and :func:`lib.eval.score.score_group`, per task)?"""
    preds = [Prediction(item_id=e.item.id, model="validation", task=e.item.task, raw=resp.text,
                        **read_answer(task_of(e.item), e.item, resp)) for e, resp in zip(examples, responses)]
    by_task: dict[str, list[int]] = {}
    for i, e in enumerate(examples):
        by_task.setdefault(e.item.task, []).append(i)
    for name, idx in by_task.items():
        group = [preds[i] for i in idx]
        score_group(get_task(name), group, [examples[i].item for i in idx], Scoring())
        for i, p in zip(idx, group):
            preds[i] = p
    return [bool(p.correct) for p in preds]


def _group_keys(e: Example) -> list[str]:
    """The accuracies an example counts in: overall, its question type, and its type and target kind
    (colour / shape: Scrapbook)."""
    kind = question_type(e.meta)
    keys = ["accuracy", f"accuracy_{kind}"]
    if task_of(e.item).scene_questions:
        keys.append(f"accuracy_{kind}_{target_kind(e.meta)}")
    return keys


def group_sizes(examples: list[Example]) -> dict[str, int]:
    """How many questions each accuracy of :func:`_accuracies` is over."""
    return dict(sorted(Counter(k for e in examples for k in _group_keys(e)).items()))


def _accuracies(examples: list[Example], hits: list[bool]) -> dict:
    """Overall accuracy, per question type, per type and target kind (:func:`_group_keys`), and
    ``macro``: the mean of the per-type accuracies (MemeQA's headline, exact match)."""
    groups: dict[str, list[bool]] = {"accuracy": []}
    per_type: dict[str, list[bool]] = {}
    for e, hit in zip(examples, hits):
        per_type.setdefault(question_type(e.meta), []).append(hit)
        for key in _group_keys(e):
            groups.setdefault(key, []).append(hit)
    out = {k: float(np.mean(v)) for k, v in sorted(groups.items()) if v}
    if per_type:
        out["macro"] = float(np.mean([np.mean(v) for v in per_type.values()]))
    return out


def selection_metric(cfg: TrainConfig, examples: list[Example]) -> str:
    """The validation metric that picks ``best/`` (see ``TrainConfig.select_by``)."""
    if cfg.select_by != "auto":
        return cfg.select_by
    wanted = {task_of(e.item).validation_metric for e in examples}
    return wanted.pop() if len(wanted) == 1 else "accuracy"  # tasks that disagree: the micro average


def majority_baseline(train: list[Example], test: list[Example]) -> dict:
    """Accuracy of always giving the training split's most frequent answer for the question type."""
    top = {}
    for kind in {question_type(e.meta) for e in test}:
        answers = sorted(e.answer for e in train if question_type(e.meta) == kind)
        top[kind] = max(set(answers), key=lambda a: (answers.count(a), a)) if answers else None
    return _accuracies(test, [e.answer == top[question_type(e.meta)] for e in test])


# --- loop -------------------------------------------------------------------------------------

class TrainingInterrupted(RuntimeError):
    """Raised by the ``stop_after`` test hook to simulate a kill after a checkpoint."""


def _oom_message(cfg: TrainConfig) -> str:
    return (f"out of GPU memory at batch_size={cfg.batch_size}, grad_accum={cfg.grad_accum}: lower batch_size "
            f"and raise grad_accum by the same factor (same effective batch), use mixed_precision=bf16, enable "
            f"gradient checkpointing, or train LoRA instead of full fine-tuning")


@dataclass
class Session:
    """A training run in progress: the accelerator, the prepared model with its optimiser, the
    examples, the resumable ``state`` (step, best validation score, seconds, tokens) and the folder
    it writes to. :func:`start_training` makes one, :func:`train_steps` advances it,
    :func:`finish_training` saves it and :func:`training_summary` reads it."""

    cfg: TrainConfig  # max_steps derived from epochs where epochs are given
    out: Path
    acc: object  # an accelerate.Accelerator
    model: object
    processor: object
    params: list  # the trained parameters (what gradient clipping sees)
    optimizer: object
    scheduler: object
    train_examples: list[Example]
    val: list[Example]  # the validation sample every validation asks
    select: str  # the validation metric that picks best/
    state: dict
    report: dict  # load_examples' report
    model_info: dict
    precision: str
    encoder_decoder: bool = False
    images: object = load_image  # the training images' loader (an ImageCache when image_cache_mb > 0)
    tensors: ImageTensors | None = None
    val_majority: float = 0.0  # the majority answer's accuracy on ``val`` (:func:`majority_baseline`)


def precision_for(requested: str) -> str:
    """The mixed precision to train in: ``auto`` is bf16 where the GPU has it, else none; fp16 on a
    machine without a GPU falls back to full precision, saying so."""
    # deferred on purpose: torch is heavy, and importing lib.train (configs, the pipeline) must stay cheap
    import torch

    if requested == "auto":
        return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no"
    if requested == "fp16" and not torch.cuda.is_available():
        print("note: mixed_precision fp16 needs a GPU; training in full precision on this CPU-only machine")
        return "no"
    return requested


def step_budget(cfg: TrainConfig, n_train: int, processes: int = 1) -> TrainConfig:
    """``cfg`` with ``max_steps`` derived from ``epochs`` (passes over the training split, as whole
    steps) when epochs are given."""
    if not cfg.epochs > 0:
        return cfg
    per_step = cfg.batch_size * cfg.grad_accum * processes
    return config.replaced(cfg, max_steps=max(1, int(np.ceil(cfg.epochs * n_train / per_step))))


def optimiser(cfg: TrainConfig, model) -> tuple[list, object, object]:
    """The trained parameters, AdamW over them and the learning-rate schedule (warmup, then cosine
    down to ``max_steps`` or constant)."""
    import torch  # deferred on purpose: torch and transformers are heavy, and importing lib.train must stay cheap
    from transformers import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(optimizer, cfg.warmup_steps, cfg.max_steps) \
        if cfg.lr_schedule == "cosine" else get_constant_schedule_with_warmup(optimizer, cfg.warmup_steps)
    return params, optimizer, scheduler


def validation_sample(cfg: TrainConfig, val: list[Example]) -> list[Example]:
    """The ``eval_items`` validation questions every validation asks (seeded, in split order)."""
    rng_val = np.random.default_rng(cfg.seed)
    return [val[i] for i in sorted(rng_val.permutation(len(val))[:cfg.eval_items])]


def resume_state(acc, cfg: TrainConfig, out: Path, resume: bool = True) -> dict:
    """The loop's state: restored from ``checkpoint/`` when resuming a run made with the same settings
    (the accelerator's model, optimiser and RNG states with it), else fresh (the curve started anew)."""
    state = {"step": 0, "best": -1.0, "train_seconds": 0.0, "tokens": 0, "settings": cfg.settings(),
             "processes": acc.num_processes}
    ckpt = out / A.CHECKPOINT
    if resume and (ckpt / "trainer.json").exists():
        saved = json.loads((ckpt / "trainer.json").read_text())
        if saved.get("settings") != cfg.settings():
            raise ValueError(f"{ckpt} was made with other training settings; set resume: false (or remove {ckpt}) "
                             f"to train afresh")
        # batch_size is per process: another number of processes is another global batch (and RNG states)
        if saved.get("processes", 1) != acc.num_processes:
            raise ValueError(f"{ckpt} was made by {saved.get('processes', 1)} process(es), this run has "
                             f"{acc.num_processes}: resume with as many, or set resume: false to train afresh")
        acc.load_state(str(ckpt))
        state = {**saved, "processes": acc.num_processes}
        if acc.is_main_process:
            # steps logged after the checkpoint are trained again: drop their rows, or they would appear twice
            kept = [r for r in read_jsonl(out / "curve.jsonl") if r["step"] <= state["step"]] \
                if (out / "curve.jsonl").exists() else []
            write_jsonl(out / "curve.jsonl", kept)
            print(f"resumed from {ckpt} at step {state['step']}")
    elif acc.is_main_process:
        (out / "curve.jsonl").unlink(missing_ok=True)
    return state


def start_training(cfg: TrainConfig, out: Path, resume: bool = True) -> Session:
    """Everything a run trains with: the accelerator (every RNG seeded), the examples (unreadable
    images skipped and said), the prepared model, its optimiser and the state to continue from."""
    from accelerate import Accelerator  # deferred on purpose: accelerate imports torch (heavy)
    from accelerate.utils import DataLoaderConfiguration, DistributedDataParallelKwargs, set_seed

    import torch  # deferred on purpose: torch is heavy, and importing lib.train must stay cheap

    processes = ranks().world
    check_data_parallel(cfg, processes)
    precision = precision_for(cfg.mixed_precision)
    # split_batches: our steps count global batches (drawn whole, then split over the ranks), so the
    # learning-rate schedule steps once per optimiser step, not once per process. cpu: without an
    # accelerator, accelerate joins torchrun's processes into a gloo group only when told (else each trains alone).
    # find_unused_parameters: a VLM has trained weights no loss reaches (the vision tower's last layer when
    # features come from the one before), and DDP otherwise waits for their gradients forever
    acc = Accelerator(mixed_precision=precision, gradient_accumulation_steps=cfg.grad_accum,
                      dataloader_config=DataLoaderConfiguration(split_batches=True),
                      cpu=processes > 1 and not torch.accelerator.is_available(),
                      kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    set_seed(cfg.seed)
    if cfg.cpu_threads and not torch.accelerator.is_available():
        torch.set_num_threads(cfg.cpu_threads)
    data, report = load_examples(cfg)
    if report["skipped_images"]:
        print(f"skipped {len(report['skipped_images'])} unreadable image(s) ({report['skipped_items']} items): "
              + "; ".join(f"{k}: {v}" for k, v in list(report["skipped_images"].items())[:5]))
    model, processor, model_info = prepare_model(cfg, str(acc.device) if acc.num_processes > 1 else None)
    encdec = is_encoder_decoder(model)
    cfg = step_budget(cfg, len(data["train"]), acc.num_processes)
    params, optimizer, scheduler = optimiser(cfg, model)
    model, optimizer, scheduler = acc.prepare(model, optimizer, scheduler)
    val = validation_sample(cfg, data["val"])
    select = selection_metric(cfg, val)
    state = resume_state(acc, cfg, out, resume)
    return Session(cfg, out, acc, model, processor, params, optimizer, scheduler, data["train"], val, select, state,
                   report, model_info, precision, encoder_decoder=encdec,
                   images=ImageCache(cfg.image_cache_mb) if cfg.image_cache_mb > 0 else load_image,
                   tensors=ImageTensors(cfg.image_cache_mb) if cfg.image_cache_mb > 0 else None,
                   val_majority=majority_baseline(data["train"], val)["accuracy"])


def check_data_parallel(cfg: TrainConfig, processes: int) -> None:
    """Refuse a model spread over the GPUs (``device_map``) in a job of several processes."""
    if processes > 1 and cfg.model.get("device_map"):
        raise ValueError(
            f"model {cfg.model.get('name')!r} has device_map {cfg.model['device_map']!r} (one model spread over the "
            f"GPUs: model parallel), but this job runs {processes} processes (data parallel: one whole model copy "
            f"per GPU). Drop device_map from the model spec to train data-parallel, or run one process "
            f"(python -m lib.train) with device_map: auto.")


def _main_says(acc, value):
    """``value`` as the main process has it, on every process: a decision every rank must share
    (the others may not see the main process's files yet)."""
    if acc.num_processes == 1:
        return value
    from accelerate.utils import broadcast_object_list  # deferred on purpose: accelerate imports torch (heavy)

    return broadcast_object_list([value])[0]


def _summed(acc, values: list[float]) -> list[float]:
    """``values`` summed over the processes (as they are, alone)."""
    if acc.num_processes == 1:
        return values
    import torch  # deferred on purpose: torch is heavy, and importing lib.train must stay cheap

    return acc.reduce(torch.tensor(values, dtype=torch.float64, device=acc.device), "sum").tolist()


def save_weights(s: Session, name: str) -> None:
    """The model's weights (adapters for LoRA) and its processor, in the run's folder ``name``."""
    s.acc.unwrap_model(s.model).save_pretrained(s.out / name)
    s.processor.save_pretrained(s.out / name)


def validate(s: Session, force_save: bool = False) -> dict:
    """Validation metrics now (``val_``-prefixed), with ``val_majority``: what always giving the
    training split's most frequent answer of each question type scores on the same questions (the
    line a model must rise above); ``best/`` when they beat the best so far (or, with ``force_save``,
    when none exists yet)."""
    from accelerate.utils import gather_object  # deferred on purpose: accelerate imports torch (heavy)

    acc, state = s.acc, s.state
    # each process asks every N-th question; all score the gathered answers, so every rank holds the same
    # metrics and takes the same best/ decision (greedy answers do not depend on the batch)
    mine = range(acc.process_index, len(s.val), acc.num_processes)
    responses = ask_examples(acc.unwrap_model(s.model), s.processor, [s.val[i] for i in mine],
                             question_first=wants_question_first(s.cfg.model),
                             max_new_tokens=s.cfg.val_max_new_tokens, spec=s.cfg.model)
    answered = dict(gather_object(list(zip(mine, responses))))
    metrics = _accuracies(s.val, score_examples(s.val, [answered[i] for i in range(len(s.val))]))
    state["validated_step"] = state["step"]
    better = metrics[s.select] > state["best"]
    state["best"] = max(state["best"], metrics[s.select])
    if acc.is_main_process and (better or (force_save and not (s.out / A.BEST).is_dir())):
        save_weights(s, A.BEST)
    return {**{f"val_{k}": v for k, v in metrics.items()},
            "val_majority": s.val_majority}


def answer_balance(examples: list[Example]) -> np.ndarray:
    """Drawing probabilities under which each answer of a question type (task and ``meta.type``) is
    equally likely and each type keeps its share of the questions."""
    keys = [(e.item.task, e.meta.get("type"), e.answer) for e in examples]
    per_answer = Counter(keys)
    per_type = Counter(k[:2] for k in keys)
    answers = Counter(k[:2] for k in per_answer)
    p = np.array([per_type[k[:2]] / (answers[k[:2]] * per_answer[k]) for k in keys])
    return p / p.sum()


def draw_batch(s: Session, train_set: list[Example], step: int, micro: int, p: np.ndarray | None = None) -> dict:
    """This process's share of micro-batch ``micro`` of step ``step``, collated, on the device. The
    global micro-batch (``batch_size`` per process) is drawn statelessly from ``rng(seed, step, micro)``,
    whatever the rank (a resumed run draws what the uninterrupted one would have; N processes draw
    what one process with ``batch_size`` x N draws), and rank r takes its r-th slice. ``p``: each
    question's probability (:func:`answer_balance`), else all alike."""
    cfg, rank, size = s.cfg, s.acc.process_index, s.cfg.batch_size * s.acc.num_processes
    # the key's last 0 keeps the draws of runs made when each process drew its own batch (process 0's)
    pick = np.random.default_rng([cfg.seed, step, micro, 0]).choice(len(train_set), size, replace=len(train_set) < size,
                                                                   p=p)
    pick = pick[rank * cfg.batch_size:(rank + 1) * cfg.batch_size]
    batch = collate([train_set[i] for i in pick], s.processor, s.processor.tokenizer.eos_token,
                    wants_question_first(cfg.model), encoder_decoder=s.encoder_decoder, spec=cfg.model,
                    images=s.images, image_tensors=s.tensors)
    return {k: v.to(s.acc.device) for k, v in batch.items()}


def train_step(s: Session, train_set: list[Example], p: np.ndarray | None = None) -> dict:
    """One optimiser step (``grad_accum`` micro-batches) on ``train_set`` (drawn with probabilities
    ``p``, else alike); returns its curve row (step, mean loss, learning rate, training seconds so
    far), the same on every process."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.train must stay cheap

    cfg, state, acc = s.cfg, s.state, s.acc
    start = time.perf_counter()
    step = state["step"]
    loss_sum, tokens = 0.0, 0
    for micro in range(cfg.grad_accum):
        batch = draw_batch(s, train_set, step, micro, p)
        with acc.accumulate(s.model):
            try:
                loss = s.model(**batch).loss
                if acc.num_processes > 1:
                    # a rank's loss is the mean over its own answer tokens and DDP averages the ranks' gradients:
                    # weighed by its share of the tokens, the step learns the global batch's token mean (as one
                    # process with batch_size x N does), whatever the answers' lengths on each rank
                    mine = (batch["labels"] != -100).sum()
                    loss = loss * mine * acc.num_processes / acc.reduce(mine, "sum")
                acc.backward(loss)
            except torch.OutOfMemoryError as e:
                raise torch.OutOfMemoryError(_oom_message(cfg)) from e
            if acc.sync_gradients and cfg.max_grad_norm:
                acc.clip_grad_norm_(s.params, cfg.max_grad_norm)
            s.optimizer.step()
            s.scheduler.step()
            s.optimizer.zero_grad()
        loss_sum += loss.item()
        tokens += int(batch["attention_mask"].sum())
    # one collective a step: every rank logs the mean loss over the ranks, all tokens and the mean time, so a
    # max_seconds stop is the same decision everywhere (a rank stopping alone would leave the others waiting)
    loss_sum, tokens, seconds = _summed(acc, [loss_sum, tokens, time.perf_counter() - start])
    state["tokens"] += int(tokens)
    state["step"] = step = step + 1
    state["train_seconds"] += seconds / acc.num_processes
    return {"step": step, "loss": loss_sum / (cfg.grad_accum * acc.num_processes), "lr": s.scheduler.get_last_lr()[0],
            "train_seconds": round(state["train_seconds"], 3)}


def focus_examples(cfg: TrainConfig, train: list[Example]) -> list[Example]:
    """The curriculum's first training questions: those about ``focus_targets`` only (none: no curriculum)."""
    return [e for e in train if cfg.focus_targets and not set(target_kind(e.meta).split("+")) - set(cfg.focus_targets)]


def save_checkpoint(s: Session) -> None:
    """``checkpoint/``: the accelerator's full state and ``trainer.json``; ``curve.csv`` brought up to date.
    Every process calls it (each saves its RNG state); the main one writes the rest."""
    s.acc.save_state(str(s.out / A.CHECKPOINT))
    if s.acc.is_main_process:
        write_json(s.out / A.CHECKPOINT / "trainer.json", s.state)
        write_curve(s.out)


def train_steps(s: Session, progress: bool = True, stop_after: int | None = None) -> None:
    """Train until ``max_steps`` (or the ``max_seconds`` cap), a curve row per step, validating every
    ``eval_every`` and checkpointing every ``checkpoint_every`` steps. ``stop_after``: the test hook
    that simulates a kill after the first checkpoint at or past that step."""
    cfg, state = s.cfg, s.state
    bar = tqdm(total=cfg.max_steps, initial=state["step"], desc="train",
               disable=not progress or not s.acc.is_main_process)
    s.model.train()
    focus = focus_examples(cfg, s.train_examples)
    pools = [(e, answer_balance(e) if cfg.balance and e else None) for e in (focus, s.train_examples)]
    while state["step"] < cfg.max_steps:
        if cfg.max_seconds and state["train_seconds"] >= cfg.max_seconds:
            break
        row = train_step(s, *pools[0 if focus and state["step"] < cfg.focus_steps else 1])
        step = row["step"]
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            row.update(validate(s))
        if s.acc.is_main_process:
            append_jsonl(s.out / "curve.jsonl", [row])
        bar.update(1)
        bar.set_postfix(loss=f"{row['loss']:.3f}")
        if step % cfg.checkpoint_every == 0:
            save_checkpoint(s)
            if stop_after is not None and step >= stop_after:
                raise TrainingInterrupted(f"stopped after step {step} (test hook)")
    bar.close()


def finish_training(s: Session) -> None:
    """End the run: when its last step was not validated (stopped by the time cap, or before the
    first scheduled validation) or there is no ``best/``, validate what there is, so that every run
    ends with a validation row and a ``best/`` (the best so far, or these weights); then ``last/``
    and the checkpoint."""
    state = s.state
    if _main_says(s.acc, state.get("validated_step") != state["step"] or not (s.out / A.BEST).is_dir()):
        row = {"step": state["step"], "loss": None, "lr": s.scheduler.get_last_lr()[0],
               "train_seconds": round(state["train_seconds"], 3), **validate(s, force_save=True)}
        if s.acc.is_main_process:
            append_jsonl(s.out / "curve.jsonl", [row])
    if s.acc.is_main_process:
        save_weights(s, "last")
    save_checkpoint(s)


def training_summary(s: Session) -> dict:
    """What the run did: steps, time, tokens and their rate, the best validation score and the metric
    that picked it, the model, the image caches' use, the data report and the resolved config."""
    state, images = s.state, s.images
    return {"steps": state["step"], "train_seconds": round(state["train_seconds"], 1), "tokens": state["tokens"],
            "tokens_per_second": round(state["tokens"] / max(state["train_seconds"], 1e-9), 1),
            "best_val_accuracy": state["best"], "selected_by": s.select, "model": s.model_info,
            "image_cache": images.stats() if isinstance(images, ImageCache) else None,
            "image_tensors": s.tensors.stats() if s.tensors is not None else None, "data": s.report,
            "config": asdict(s.cfg), "mixed_precision": s.precision, "processes": s.acc.num_processes}


def train(cfg: TrainConfig, out_dir: str | Path, resume: bool = True, progress: bool = True,
          stop_after: int | None = None) -> dict:
    """Train, validating every ``eval_every`` steps; saves ``best/`` and ``last/`` weights (adapters
    for LoRA), ``checkpoint/`` (full state for resume) and ``curve.csv``; returns the run's summary.
    The steps, each callable alone: :func:`start_training`, :func:`train_steps`,
    :func:`finish_training`, :func:`training_summary`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = start_training(cfg, out, resume)
    train_steps(s, progress, stop_after)
    finish_training(s)
    return training_summary(s)


def write_curve(out: Path) -> Path:
    """``curve.csv`` from the per-step log (validation columns filled on evaluation steps)."""
    path = out / A.CURVE
    pd.DataFrame(list(read_jsonl(out / "curve.jsonl"))).to_csv(path, index=False)
    return path


def load_trained(cfg: TrainConfig, folder: str | Path):
    """(model, processor) of saved weights: a full model folder, or a LoRA adapter on the base."""
    folder = Path(folder)
    if (folder / "adapter_config.json").exists():
        from peft import PeftModel  # deferred on purpose: heavy, and only LoRA weights need it

        base = load_model(cfg.model).load()
        return PeftModel.from_pretrained(base.model, folder).eval(), base.processor
    trained = load_model({"backend": "hf", "name": str(folder)}).load()
    return trained.model, trained.processor


def compare(cfg: TrainConfig, out_dir: str | Path) -> dict:
    """Base (untrained) vs trained (best validation) vs the majority answer, on the test split.
    The majority answer per question type comes from every training question (no training filter)."""
    # training filters touch the train split only, so one unfiltered load serves both purposes
    everything, _ = load_examples(replace(cfg, train_types=[], train_targets=[]))
    rng = np.random.default_rng(cfg.seed)
    test = [everything["test"][i] for i in sorted(rng.permutation(len(everything["test"]))[:cfg.max_test])]
    base = load_model(cfg.model).load()
    model, processor = load_trained(cfg, Path(out_dir) / "best")
    return {"n_test": len(test), "test_images": len({e.image for e in test}), "n": group_sizes(test),
            "majority": majority_baseline(everything["train"], test),
            "base": evaluate_examples(base.model, base.processor, test, question_first=wants_question_first(cfg.model),
                                     max_new_tokens=cfg.val_max_new_tokens, spec=cfg.model),
            "trained": evaluate_examples(model, processor, test, question_first=wants_question_first(cfg.model),
                                        max_new_tokens=cfg.val_max_new_tokens, spec=cfg.model)}


# --- the stage --------------------------------------------------------------------------------------

def bind_datasets(cfg: TrainConfig, out: str | Path) -> TrainConfig:
    """The config with its dataset fields (``stage:`` / ``run:`` references to earlier stages'
    folders, :func:`lib.artifacts.resolve`) resolved against the run folder of ``out``: what
    training reads and provenance records."""
    run_folder = Path(out).parent
    return config.replaced(cfg, **{k: A.resolve(getattr(cfg, k), run_folder)
                                   for k in ("dataset", "val_dataset", "test_dataset") if getattr(cfg, k)})


def curve(out: str | Path) -> tuple[pd.DataFrame, tuple]:
    """The training curve :func:`train` wrote (``curve.csv``: loss per step, validation scores where
    measured) and its figure (``figures/training_curve``); the table and ``(fig, ax)``."""
    table = pd.read_csv(Path(out) / A.CURVE)
    fig, ax = plots.training_curve(table)
    plots.save(fig, Path(out) / A.FIGURES, "training_curve", close=True)
    return table, (fig, ax)


def comparison(cfg: TrainConfig, out: str | Path) -> tuple[dict, tuple]:
    """Base vs trained vs the majority answer on up to ``cfg.max_test`` test questions
    (:func:`compare`) and its bar chart (``figures/base_vs_trained``); the result and ``(fig, ax)``."""
    result = compare(cfg, out)
    fig, ax = plots.accuracy_bars(pd.DataFrame({k: result[k] for k in ("majority", "base", "trained")}).T, result["n"])
    plots.save(fig, Path(out) / A.FIGURES, "base_vs_trained", close=True)
    return result, (fig, ax)


def finish(cfg: TrainConfig, out: str | Path, training: dict, result: dict) -> dict:
    """The summary from what the steps returned (:func:`train`'s summary, :func:`comparison`'s
    result) and provenance (``cfg`` as :func:`bind_datasets` returned it)."""
    summary = {"base": result["base"], "trained": result["trained"], "majority": result["majority"],
               "train_seconds": training["train_seconds"], "n_test": result["n_test"], "training": training}
    return config.finish(Path(out), A.TRAIN, cfg, summary)


def run(cfg: TrainConfig, out: str | Path, progress: bool = True) -> dict:
    """The stage, step by step as notebook 05 runs it: the datasets resolved, training (resuming when
    allowed), the curve, base / trained / majority compared on the test split, summary and provenance."""
    out = Path(out)
    cfg = bind_datasets(cfg, out)
    training = train(cfg, out, resume=cfg.resume, progress=progress)
    if not ranks().main:
        return {}  # the main process alone draws the curve, compares and writes the summary
    curve(out)
    result, _ = comparison(cfg, out)
    return finish(cfg, out, training, result)


if __name__ == "__main__":
    sys.exit(cli.main("python -m lib.train", TrainConfig, run, description="Stage 05: fine-tune a VLM (LoRA or full)."))
