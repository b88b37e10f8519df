"""What the training engine derives from the stage's settings before it trains: the mixed
precision the machine allows, the step budget of an epoch budget, and the refusal of a model
spread over the GPUs in a data-parallel job.

The settings themselves are stage 05's :class:`lib.stages.train.TrainConfig` (the one source of their
defaults); the engine sits below the stage and takes that config as the :class:`TrainSettings`
it is, reading its fields."""

from __future__ import annotations

import numpy as np

from lib import config

# lib.stages.train.TrainConfig, as the engine sees it: the stage above owns the class (and its defaults), the
# engine below cannot import it, so it takes the stage config it is and reads TrainConfig's fields
TrainSettings = config.StageConfig


def precision_for(requested: str) -> str:
    """The mixed precision to train in: ``auto`` is bf16 where the GPU has it, else none; fp16 on a
    machine without a GPU falls back to full precision, saying so."""
    # deferred on purpose: torch is heavy, and importing lib.training (under the stage's config) must stay cheap
    import torch

    if requested == "auto":
        return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no"
    if requested == "fp16" and not torch.cuda.is_available():
        print(
            "note: mixed_precision fp16 needs a GPU; training in full precision on this CPU-only machine"
        )
        return "no"
    return requested


def step_budget(cfg: TrainSettings, n_train: int, processes: int = 1) -> TrainSettings:
    """``cfg`` with ``max_steps`` derived from ``epochs`` (passes over the training split, as whole
    steps) when epochs are given."""
    if not cfg.epochs > 0:
        return cfg
    per_step = cfg.batch_size * cfg.grad_accum * processes
    return config.replaced(cfg, max_steps=max(1, int(np.ceil(cfg.epochs * n_train / per_step))))


def check_data_parallel(cfg: TrainSettings, processes: int) -> None:
    """Refuse a model spread over the GPUs (``device_map``) in a job of several processes."""
    if processes > 1 and cfg.model.get("device_map"):
        raise ValueError(
            f"model {cfg.model.get('name')!r} has device_map {cfg.model['device_map']!r} (one model spread over the "
            f"GPUs: model parallel), but this job runs {processes} processes (data parallel: one whole model copy "
            f"per GPU). Drop device_map from the model spec to train data-parallel, or run one process "
            f"(python -m lib.stages.train) with device_map: auto."
        )
