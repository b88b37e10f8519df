"""Stage 05 · Train: LoRA (peft) or full fine-tuning of a VLM on a project dataset, with
generation-based validation on the task's own metric, checkpoints and exact resume.

    run(TrainConfig(dataset=...), out)                    # what notebook 05 does: train, compare, figures
    python -m lib.stages.train --profile demo          # -> outputs/demo/05_train
    torchrun --nproc_per_node N -m lib.stages.train --params FILE --out DIR      # N processes (or accelerate launch)

Notebook 05 calls the steps :func:`run` composes, one per section: :func:`bind_datasets`,
:func:`~lib.training.loop.train`, :func:`curve`, :func:`comparison`, :func:`finish`. The work is
the training engine's (:mod:`lib.training`): examples and batches, the model, the loop with its
validation, checkpoints and resume, one process or many. This module holds the stage's config
(the one source of its defaults), binds the engine to a run, compares base, trained and the
majority answer and the model asked about blank pictures, and draws the figures.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from lib import config
from lib.config import cli
from lib.core.ranks import ranks
from lib.io import artifacts
from lib.models import check_spec, load_model
from lib.pages import plots
from lib.tasks import wants_question_first
from lib.training.data import Example, collate, load_examples
from lib.training.loop import finish_training, start_training, train, train_steps, training_summary
from lib.training.model import load_trained
from lib.training.validation import (
    accuracies,
    ask_examples,
    blank_examples,
    evaluate_examples,
    group_sizes,
    majority_hits,
    margins,
    score_examples,
)

# the steps notebook 05 calls and the engine's entry points the tests and scripts/gpu_check.py reach through the stage
__all__ = [
    "SYSTEMS",
    "Example",
    "TrainConfig",
    "bind_datasets",
    "collate",
    "compare",
    "comparison",
    "curve",
    "evaluate_examples",
    "finish",
    "finish_training",
    "run",
    "score_examples",
    "start_training",
    "train",
    "train_steps",
    "training_summary",
]


@dataclass
class TrainConfig(config.StageConfig):
    """Training parameters (all plain values, so a YAML params file maps onto them)."""

    STAGE: ClassVar[str] = artifacts.TRAIN
    MODEL_ROLES: ClassVar[dict] = {"model": "vlm"}

    model: dict = field(default_factory=lambda: {"backend": "tiny", "name": "llava"})
    # a dataset folder (items.jsonl + images/), stage:NN_stage/datasets/<name> of this run, or a MemeQA
    # JSON split (its images in memeqa_images). With val_dataset and test_dataset (same kinds) the
    # dataset's own splits are used (MemeQA's train / dev / test files); otherwise it is split by image.
    dataset: str = ""
    val_dataset: str = ""
    test_dataset: str = ""
    memeqa_images: str = ""  # the images folder of MemeQA JSON splits
    # filters on what an item's task says of it (Task.facets; an item without the facet, e.g. a MemeQA
    # question's form, passes; empty: all): question types, groups, forms, and the levels
    # validation and test keep (Scrapbook's; level 1: the protocol's gating starts there)
    types: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    forms: list = field(default_factory=list)
    eval_levels: list = field(default_factory=lambda: [1])
    # the validation metric that picks best/: "auto" = the task's own (Task.validation_metric: MemeQA's
    # macro average of exact match over its question types for mcq, accuracy otherwise), or by hand
    select_by: str = "auto"
    train_types: list = field(
        default_factory=list
    )  # train only on these question types; empty: all of `types`
    train_targets: list = field(
        default_factory=list
    )  # train only on questions describing these attributes
    #   (e.g. [color]: colour questions only); empty: all. Validation and test keep every question.
    focus_targets: list = field(
        default_factory=list
    )  # curriculum: for the first focus_steps steps, train
    focus_steps: int = (
        0  # only on questions about these attributes (an easy concept first), then on all
    )
    # draw training questions so that every answer of a question type is equally likely (class-balanced
    # sampling: a model that only learnt the answer prior gains nothing); validation and test keep the
    # data's own answers. False: questions as often as the data has them
    balance: bool = False
    val_fraction: float = 0.1  # of images
    test_fraction: float = 0.1  # of images
    full_finetune: bool = (
        False  # True for randomly initialised models: LoRA on random weights learns little
    )
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: list = field(
        default_factory=list
    )  # default: the language model's linear layers
    lr: float = 2e-4
    lr_schedule: str = (
        "cosine"  # cosine (after warmup_steps) or constant (the original MemeQA runs)
    )
    weight_decay: float = 0.0
    warmup_steps: int = 20
    max_steps: int = (
        200  # the budget: in steps, so a slow or busy machine gives the same model, only later
    )
    epochs: float = (
        0.0  # > 0: the budget in passes over the training split instead (max_steps derived from it)
    )
    max_seconds: float = (
        0.0  # a safety net only (0: none): stops early, then still validates and saves best/
    )
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
    val_max_new_tokens: int = (
        8  # validation decodes like evaluation: free text unless the task has a closed set
    )
    max_test: int = 1000  # held-out questions for the comparison of SYSTEMS
    image_cache_mb: int = 1024  # decoded training images kept in memory (least recently used out; 0: decode every step)
    resume: bool = True  # continue from checkpoint/ when it was made with the same settings
    seed: int = 0

    def check(self, source: str) -> None:
        check_spec(self.model, f"{source}: model")
        if not self.dataset:
            raise config.ParamsError(
                f"{source}: dataset must name a dataset folder (e.g. stage:04_scrapbook/datasets/scrapbook)"
            )
        if bool(self.val_dataset) != bool(self.test_dataset):
            raise config.ParamsError(
                f"{source}: give both val_dataset and test_dataset (a dataset's own splits) or neither"
            )
        if self.select_by not in ("auto", "accuracy", "macro"):
            raise config.ParamsError(
                f"{source}: select_by must be auto, accuracy or macro, got {self.select_by!r}"
            )
        if self.cpu_threads < 0:
            raise config.ParamsError(
                f"{source}: cpu_threads must be 0 (torch's default) or a number of threads, "
                f"got {self.cpu_threads}"
            )
        if self.lr_schedule not in ("cosine", "constant"):
            raise config.ParamsError(
                f"{source}: lr_schedule must be cosine or constant, got {self.lr_schedule!r}"
            )

    def settings(self) -> dict:
        """What a checkpoint must share with the run that resumes it."""
        return {
            k: v
            for k, v in asdict(self).items()
            if k not in ("resume", "max_test", "max_seconds", "image_cache_mb", "cpu_threads")
        }


SYSTEMS = (
    artifacts.TRAIN_SYSTEMS
)  # the held-out comparison's systems, in the order tables show them


def compare(cfg: TrainConfig, out_dir: str | Path) -> dict:
    """Base (untrained) vs trained (best validation) vs the majority answer vs the trained model
    asked about blank pictures (:func:`~lib.training.validation.blank_examples`), on the test split,
    and the trained model's margins over each (:func:`~lib.training.validation.margins`). The
    majority answer per question type comes from every training question (no training filter)."""
    # training filters touch the train split only, so one unfiltered load serves both purposes
    everything, _ = load_examples(replace(cfg, train_types=[], train_targets=[]))
    rng = np.random.default_rng(cfg.seed)
    test = [
        everything["test"][i]
        for i in sorted(rng.permutation(len(everything["test"]))[: cfg.max_test])
    ]

    def hits(model, processor, examples) -> list[bool]:
        question_first = wants_question_first(cfg.model)
        responses = ask_examples(
            model, processor, examples, cfg.val_max_new_tokens, 32, question_first, cfg.model
        )
        return score_examples(examples, responses)

    right = {"majority": majority_hits(everything["train"], test)}
    base = load_model(cfg.model).load()
    right["base"] = hits(base.model, base.processor, test)
    del base
    model, processor = load_trained(cfg, Path(out_dir) / "best")
    with tempfile.TemporaryDirectory() as blank:
        right["blank"] = hits(model, processor, blank_examples(test, blank))
    right["trained"] = hits(model, processor, test)
    return {
        "n_test": len(test),
        "test_images": len({e.image for e in test}),
        "n": group_sizes(test),
        **{name: accuracies(test, right[name]) for name in SYSTEMS},
        "margins": margins({name: right[name] for name in ("majority", "blank", "trained")}, test),
    }


def bind_datasets(cfg: TrainConfig, out: str | Path) -> TrainConfig:
    """The config with its dataset fields (``stage:`` / ``run:`` references to earlier stages'
    folders, :func:`lib.io.artifacts.resolve`) resolved against the run folder of ``out``: what
    training reads and provenance records."""
    run_folder = Path(out).parent
    return config.replaced(
        cfg,
        **{
            k: artifacts.resolve(getattr(cfg, k), run_folder)
            for k in ("dataset", "val_dataset", "test_dataset")
            if getattr(cfg, k)
        },
    )


def curve(out: str | Path) -> tuple[pd.DataFrame, tuple]:
    """The training curve :func:`train` wrote (``curve.csv``: loss per step, validation scores where
    measured) and its figure (``figures/training_curve``); the table and ``(fig, ax)``."""
    table = pd.read_csv(Path(out) / artifacts.CURVE)
    fig, ax = plots.training_curve(table)
    plots.save(fig, Path(out) / artifacts.FIGURES, "training_curve", close=True)
    return table, (fig, ax)


def comparison(cfg: TrainConfig, out: str | Path) -> tuple[dict, tuple]:
    """The :data:`SYSTEMS` on up to ``cfg.max_test`` test questions (:func:`compare`) and its bar
    chart (``figures/base_vs_trained``); the result and ``(fig, ax)``."""
    result = compare(cfg, out)
    fig, ax = plots.accuracy_bars(pd.DataFrame({k: result[k] for k in SYSTEMS}).T, result["n"])
    plots.save(fig, Path(out) / artifacts.FIGURES, "base_vs_trained", close=True)
    return result, (fig, ax)


def finish(cfg: TrainConfig, out: str | Path, training: dict, result: dict) -> dict:
    """The summary from what the steps returned (:func:`train`'s summary, :func:`comparison`'s
    result) and provenance (``cfg`` as :func:`bind_datasets` returned it)."""
    summary = {
        **{name: result[name] for name in SYSTEMS},
        "margins": result["margins"],
        "train_seconds": training["train_seconds"],
        "n_test": result["n_test"],
        "training": training,
    }
    return config.finish(Path(out), artifacts.TRAIN, cfg, summary)


@config.stage_run
def run(cfg: TrainConfig, out: str | Path, progress: bool = True) -> dict:
    """The stage, step by step as notebook 05 runs it: the datasets resolved, training (resuming when
    allowed), the curve, the SYSTEMS compared on the test split, summary and provenance."""
    out = Path(out)
    cfg = bind_datasets(cfg, out)
    training = train(cfg, out, resume=cfg.resume, progress=progress)
    if not ranks().main:
        return {}  # the main process alone draws the curve, compares and writes the summary
    curve(out)
    result, _ = comparison(cfg, out)
    return finish(cfg, out, training, result)


if __name__ == "__main__":
    sys.exit(
        cli.main(
            "python -m lib.stages.train",
            TrainConfig,
            run,
            description="Stage 05: fine-tune a VLM (LoRA or full).",
        )
    )
