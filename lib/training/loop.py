"""The training loop: a :class:`Session` (accelerator, prepared model and optimiser, examples,
resumable state) started by :func:`start_training`, advanced by :func:`train_steps` (validating
and checkpointing on schedule), ended by :func:`finish_training` and read by
:func:`training_summary`; :func:`train` composes them.

Why an explicit loop on ``accelerate`` rather than transformers' ``Trainer`` (both tried: a Trainer
run with :func:`lib.training.data.collate` and a callback calling
:func:`lib.training.validation.evaluate_examples` trains fine): validation here is *generation*
with constrained answers scored by the task's metric, and Trainer's evaluation loop computes
teacher-forced logits, so the metric lives in a callback that Trainer's best-model selection does
not see, next to an evaluation pass we do not need; the demo's curriculum (switching the training
pool at a step) and the stateless batch draws that make resume exact would fight Trainer's
sampler. The explicit loop is a few short functions, and ``accelerate`` still gives devices, mixed
precision, gradient accumulation, multi-GPU and checkpoint state.

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
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from lib.core.ranks import ranks
from lib.io import (
    ImageCache,
    append_jsonl,
    artifacts,
    load_image,
    read_jsonl,
    write_json,
    write_jsonl,
)
from lib.models.hf_images import ImageTensors
from lib.models.hf_processors import is_encoder_decoder
from lib.tasks import wants_question_first
from lib.training.data import Example, answer_balance, collate, load_examples
from lib.training.loss import answer_loss, keeps_answer_logits
from lib.training.model import optimiser, prepare_model
from lib.training.plan import TrainSettings, check_data_parallel, precision_for, step_budget
from lib.training.validation import (
    accuracies,
    ask_examples,
    majority_baseline,
    score_examples,
    selection_metric,
    validation_sample,
)


class TrainingInterrupted(RuntimeError):
    """Raised by the ``stop_after`` test hook to simulate a kill after a checkpoint."""


def _oom_message(cfg: TrainSettings) -> str:
    return (
        f"out of GPU memory at batch_size={cfg.batch_size}, grad_accum={cfg.grad_accum}: lower batch_size "
        f"and raise grad_accum by the same factor (same effective batch), use mixed_precision=bf16, enable "
        f"gradient checkpointing, or train LoRA instead of full fine-tuning"
    )


@dataclass
class Session:
    """A training run in progress: the accelerator, the prepared model with its optimiser, the
    examples, the resumable ``state`` (step, best validation score, seconds, tokens) and the folder
    it writes to. :func:`start_training` makes one, :func:`train_steps` advances it,
    :func:`finish_training` saves it and :func:`training_summary` reads it."""

    cfg: TrainSettings  # max_steps derived from epochs where epochs are given
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
    images: object = (
        load_image  # the training images' loader (an ImageCache when image_cache_mb > 0)
    )
    tensors: ImageTensors | None = None
    val_majority: float = (
        0.0  # the majority answer's accuracy on ``val`` (:func:`majority_baseline`)
    )
    answer_logits: bool = (
        False  # logits at the answer positions only (:func:`lib.training.loss.keeps_answer_logits`)
    )


def resume_state(acc, cfg: TrainSettings, out: Path, resume: bool = True) -> dict:
    """The loop's state: restored from ``checkpoint/`` when resuming a run made with the same settings
    (the accelerator's model, optimiser and RNG states with it), else fresh (the curve started anew)."""
    state = {
        "step": 0,
        "best": -1.0,
        "train_seconds": 0.0,
        "tokens": 0,
        "settings": cfg.settings(),
        "processes": acc.num_processes,
    }
    ckpt = out / artifacts.CHECKPOINT
    if resume and (ckpt / "trainer.json").exists():
        saved = json.loads((ckpt / "trainer.json").read_text())
        if saved.get("settings") != cfg.settings():
            theirs, ours = saved.get("settings") or {}, cfg.settings()
            differ = ", ".join(
                f"{k}: {theirs.get(k)!r} there, {ours.get(k)!r} here"
                for k in sorted(set(theirs) | set(ours))
                if theirs.get(k) != ours.get(k)
            )
            raise ValueError(
                f"{ckpt} was made with other training settings ({differ}); set those values to resume, "
                f"or resume: false (or remove {ckpt}) to train afresh"
            )
        # batch_size is per process: another number of processes is another global batch (and RNG states)
        if saved.get("processes", 1) != acc.num_processes:
            raise ValueError(
                f"{ckpt} was made by {saved.get('processes', 1)} process(es), this run has "
                f"{acc.num_processes}: resume with as many, or set resume: false to train afresh"
            )
        acc.load_state(str(ckpt))
        state = {**saved, "processes": acc.num_processes}
        if acc.is_main_process:
            # steps logged after the checkpoint are trained again: drop their rows, or they would appear twice
            kept = (
                [r for r in read_jsonl(out / "curve.jsonl") if r["step"] <= state["step"]]
                if (out / "curve.jsonl").exists()
                else []
            )
            write_jsonl(out / "curve.jsonl", kept)
            print(f"resumed from {ckpt} at step {state['step']}")
    elif acc.is_main_process:
        (out / "curve.jsonl").unlink(missing_ok=True)
    return state


def _accelerator(cfg: TrainSettings, processes: int, precision: str):
    """The run's accelerate ``Accelerator``. split_batches: our steps count global batches (drawn
    whole, then split over the ranks), so the learning-rate schedule steps once per optimiser step,
    not once per process. cpu: without an accelerator, accelerate joins torchrun's processes into a
    gloo group only when told (else each trains alone). find_unused_parameters: a VLM has trained
    weights no loss reaches (the vision tower's last layer when features come from the one before),
    and DDP otherwise waits for their gradients forever."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.training must stay cheap
    from accelerate import Accelerator  # deferred on purpose: accelerate imports torch (heavy)
    from accelerate.utils import DataLoaderConfiguration, DistributedDataParallelKwargs

    return Accelerator(
        mixed_precision=precision,
        gradient_accumulation_steps=cfg.grad_accum,
        dataloader_config=DataLoaderConfiguration(split_batches=True),
        cpu=processes > 1 and not torch.accelerator.is_available(),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
    )


def start_training(cfg: TrainSettings, out: Path, resume: bool = True) -> Session:
    """Everything a run trains with: the accelerator (every RNG seeded), the examples (unreadable
    images skipped and said), the prepared model, its optimiser and the state to continue from."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.training must stay cheap
    from accelerate.utils import set_seed

    processes = ranks().world
    check_data_parallel(cfg, processes)
    precision = precision_for(cfg.mixed_precision)
    acc = _accelerator(cfg, processes, precision)
    set_seed(cfg.seed)
    if cfg.cpu_threads and not torch.accelerator.is_available():
        torch.set_num_threads(cfg.cpu_threads)
    data, report = load_examples(cfg)
    if report["skipped_images"]:
        print(
            f"skipped {len(report['skipped_images'])} unreadable image(s) ({report['skipped_items']} items): "
            + "; ".join(f"{k}: {v}" for k, v in list(report["skipped_images"].items())[:5])
        )
    model, processor, model_info = prepare_model(
        cfg, str(acc.device) if acc.num_processes > 1 else None
    )
    encdec = is_encoder_decoder(model)
    cfg = step_budget(cfg, len(data["train"]), acc.num_processes)
    params, optimizer, scheduler = optimiser(cfg, model)
    model, optimizer, scheduler = acc.prepare(model, optimizer, scheduler)
    val = validation_sample(cfg, data["val"])
    select = selection_metric(cfg, val)
    state = resume_state(acc, cfg, out, resume)
    return Session(
        cfg,
        out,
        acc,
        model,
        processor,
        params,
        optimizer,
        scheduler,
        data["train"],
        val,
        select,
        state,
        report,
        model_info,
        precision,
        encoder_decoder=encdec,
        images=ImageCache(cfg.image_cache_mb) if cfg.image_cache_mb > 0 else load_image,
        tensors=ImageTensors(cfg.image_cache_mb) if cfg.image_cache_mb > 0 else None,
        val_majority=majority_baseline(data["train"], val)["accuracy"],
        answer_logits=keeps_answer_logits(acc.unwrap_model(model)),
    )


def _main_says(acc, value):
    """``value`` as the main process has it, on every process: a decision every rank must share
    (the others may not see the main process's files yet)."""
    if acc.num_processes == 1:
        return value
    from accelerate.utils import (
        broadcast_object_list,  # deferred on purpose: accelerate imports torch (heavy)
    )

    return broadcast_object_list([value])[0]


def _summed(acc, values: list[float]) -> list[float]:
    """``values`` summed over the processes (as they are, alone)."""
    if acc.num_processes == 1:
        return values
    import torch  # deferred on purpose: torch is heavy, and importing lib.training must stay cheap

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
    from accelerate.utils import (
        gather_object,  # deferred on purpose: accelerate imports torch (heavy)
    )

    acc, state = s.acc, s.state
    # each process asks every N-th question; all score the gathered answers, so every rank holds the same
    # metrics and takes the same best/ decision (greedy answers do not depend on the batch)
    mine = range(acc.process_index, len(s.val), acc.num_processes)
    responses = ask_examples(
        acc.unwrap_model(s.model),
        s.processor,
        [s.val[i] for i in mine],
        question_first=wants_question_first(s.cfg.model),
        max_new_tokens=s.cfg.val_max_new_tokens,
        spec=s.cfg.model,
    )
    answered = dict(gather_object(list(zip(mine, responses))))
    metrics = accuracies(s.val, score_examples(s.val, [answered[i] for i in range(len(s.val))]))
    state["validated_step"] = state["step"]
    better = metrics[s.select] > state["best"]
    state["best"] = max(state["best"], metrics[s.select])
    if acc.is_main_process and (better or (force_save and not (s.out / artifacts.BEST).is_dir())):
        save_weights(s, artifacts.BEST)
    return {**{f"val_{k}": v for k, v in metrics.items()}, "val_majority": s.val_majority}


def draw_batch(
    s: Session, train_set: list[Example], step: int, micro: int, p: np.ndarray | None = None
) -> dict:
    """This process's share of micro-batch ``micro`` of step ``step``, collated, on the device. The
    global micro-batch (``batch_size`` per process) is drawn statelessly from ``rng(seed, step, micro)``,
    whatever the rank (a resumed run draws what the uninterrupted one would have; N processes draw
    what one process with ``batch_size`` x N draws), and rank r takes its r-th slice. ``p``: each
    question's probability (:func:`answer_balance`), else all alike."""
    cfg, rank, size = s.cfg, s.acc.process_index, s.cfg.batch_size * s.acc.num_processes
    # the key's last 0 keeps the draws of runs made when each process drew its own batch (process 0's)
    pick = np.random.default_rng([cfg.seed, step, micro, 0]).choice(
        len(train_set), size, replace=len(train_set) < size, p=p
    )
    pick = pick[rank * cfg.batch_size : (rank + 1) * cfg.batch_size]
    batch = collate(
        [train_set[i] for i in pick],
        s.processor,
        s.processor.tokenizer.eos_token,
        wants_question_first(cfg.model),
        encoder_decoder=s.encoder_decoder,
        spec=cfg.model,
        images=s.images,
        image_tensors=s.tensors,
    )
    return {k: v.to(s.acc.device) for k, v in batch.items()}


def train_step(s: Session, train_set: list[Example], p: np.ndarray | None = None) -> dict:
    """One optimiser step (``grad_accum`` micro-batches) on ``train_set`` (drawn with probabilities
    ``p``, else alike); returns its curve row (step, mean loss, learning rate, training seconds so
    far), the same on every process."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.training must stay cheap

    cfg, state, acc = s.cfg, s.state, s.acc
    start = time.perf_counter()
    step = state["step"]
    loss_sum, tokens = 0.0, 0
    for micro in range(cfg.grad_accum):
        batch = draw_batch(s, train_set, step, micro, p)
        with acc.accumulate(s.model):
            try:
                loss = answer_loss(s.model, batch, s.answer_logits)
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
    return {
        "step": step,
        "loss": loss_sum / (cfg.grad_accum * acc.num_processes),
        "lr": s.scheduler.get_last_lr()[0],
        "train_seconds": round(state["train_seconds"], 3),
    }


def focus_examples(cfg: TrainSettings, train: list[Example]) -> list[Example]:
    """The curriculum's first training questions: those about ``focus_targets`` only (none: no curriculum)."""
    return [e for e in train if cfg.focus_targets and e.describes_only(cfg.focus_targets)]


def save_checkpoint(s: Session) -> None:
    """``checkpoint/``: the accelerator's full state and ``trainer.json``; ``curve.csv`` brought up to date.
    Every process calls it (each saves its RNG state); the main one writes the rest."""
    s.acc.save_state(str(s.out / artifacts.CHECKPOINT))
    if s.acc.is_main_process:
        write_json(s.out / artifacts.CHECKPOINT / "trainer.json", s.state)
        write_curve(s.out)


def train_steps(s: Session, progress: bool = True, stop_after: int | None = None) -> None:
    """Train until ``max_steps`` (or the ``max_seconds`` cap), a curve row per step, validating every
    ``eval_every`` and checkpointing every ``checkpoint_every`` steps. ``stop_after``: the test hook
    that simulates a kill after the first checkpoint at or past that step."""
    cfg, state = s.cfg, s.state
    bar = tqdm(
        total=cfg.max_steps,
        initial=state["step"],
        desc="train",
        disable=not progress or not s.acc.is_main_process,
    )
    s.model.train()
    focus = focus_examples(cfg, s.train_examples)
    pools = [
        (e, answer_balance(e) if cfg.balance and e else None) for e in (focus, s.train_examples)
    ]
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
        bar.set_postfix(loss=f"{row['loss']:.3f}", refresh=False)
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
    if _main_says(
        s.acc, state.get("validated_step") != state["step"] or not (s.out / artifacts.BEST).is_dir()
    ):
        row = {
            "step": state["step"],
            "loss": None,
            "lr": s.scheduler.get_last_lr()[0],
            "train_seconds": round(state["train_seconds"], 3),
            **validate(s, force_save=True),
        }
        if s.acc.is_main_process:
            append_jsonl(s.out / "curve.jsonl", [row])
    if s.acc.is_main_process:
        save_weights(s, "last")
    save_checkpoint(s)


def training_summary(s: Session) -> dict:
    """What the run did: steps, time, tokens and their rate, the best validation score and the metric
    that picked it, the model, the image caches' use, the data report and the resolved config."""
    state, images = s.state, s.images
    return {
        "steps": state["step"],
        "train_seconds": round(state["train_seconds"], 1),
        "tokens": state["tokens"],
        "tokens_per_second": round(state["tokens"] / max(state["train_seconds"], 1e-9), 1),
        "best_val_accuracy": state["best"],
        "selected_by": s.select,
        "model": s.model_info,
        "image_cache": images.stats() if isinstance(images, ImageCache) else None,
        "image_tensors": s.tensors.stats() if s.tensors is not None else None,
        "data": s.report,
        "config": asdict(s.cfg),
        "mixed_precision": s.precision,
        "processes": s.acc.num_processes,
    }


def train(
    cfg: TrainSettings,
    out_dir: str | Path,
    resume: bool = True,
    progress: bool = True,
    stop_after: int | None = None,
) -> dict:
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
    path = out / artifacts.CURVE
    pd.DataFrame(list(read_jsonl(out / "curve.jsonl"))).to_csv(path, index=False)
    return path
