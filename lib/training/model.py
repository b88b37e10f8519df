"""The model training changes: loaded from its spec and wrapped for LoRA (the language model's
Linear layers) or full fine-tuning, its optimiser and learning-rate schedule, and saved weights
loaded back (a full model folder, or a LoRA adapter on the base)."""

from __future__ import annotations

from pathlib import Path

from lib.models import load_model
from lib.training.plan import TrainSettings

# Where a VLM keeps its language model (LLaVA, Qwen-VL, BLIP-2, Florence-2: language_model; Idefics3,
# Kosmos-2: text_model): LoRA adapts that model's Linear layers unless told otherwise.
LM_SCOPES = ("language_model.", "text_model.")


def lm_linear_modules(model) -> list[str]:
    """Names of the language model's Linear layers - attention and MLP, whatever the family calls
    them (q_proj / q / query, fc1 / wi_0 / down_proj...), in decoder-only and encoder-decoder
    models alike - leaving out the vision tower, the projector (Q-Former included) and lm_head:
    the original MemeQA setup's "every Linear except the projector, the vision tower and lm_head"."""
    import torch  # deferred on purpose: torch is heavy, and importing lib.training must stay cheap

    names = []
    for name, module in model.named_modules():
        if (
            isinstance(module, torch.nn.Linear)
            and any(scope in name for scope in LM_SCOPES)
            and not name.endswith("lm_head")
            and "vision" not in name
        ):
            names.append(name)
    return names


def prepare_model(cfg: TrainSettings, device: str | None = None):
    """Load the model named by the spec and wrap it for training (LoRA unless full fine-tuning).
    ``device``: load it there whole (one copy per process when training data-parallel)."""
    backend = load_model({**cfg.model, "device_map": device} if device else cfg.model).load()
    model, processor = backend.model, backend.processor
    if cfg.full_finetune:
        for p in model.parameters():
            p.requires_grad_(True)
        return (
            model,
            processor,
            {"mode": "full", "trainable": sum(p.numel() for p in model.parameters())},
        )
    from peft import (  # deferred on purpose: heavy, and only LoRA needs it
        LoraConfig,
        get_peft_model,
    )

    targets = cfg.target_modules or lm_linear_modules(model)
    if not targets:
        raise ValueError(
            f"model {cfg.model}: no Linear layers under {LM_SCOPES} (its language model); "
            f"set target_modules"
        )
    model = get_peft_model(
        model,
        LoraConfig(
            r=cfg.lora_r,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=cfg.lora_dropout,
            target_modules=targets,
        ),
    )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    print(
        f"LoRA on {len(targets)} modules ({trainable:,} of {total:,} parameters, {100 * trainable / total:.2f}%): "
        f"{', '.join(targets[:6])}{' ...' if len(targets) > 6 else ''}"
    )
    return (
        model,
        processor,
        {"mode": "lora", "target_modules": targets, "trainable": trainable, "total": total},
    )


def optimiser(cfg: TrainSettings, model) -> tuple[list, object, object]:
    """The trained parameters, AdamW over them and the learning-rate schedule (warmup, then cosine
    down to ``max_steps`` or constant)."""
    import torch  # deferred on purpose: torch and transformers are heavy, and importing lib.training must stay cheap
    from transformers import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=_fused(params) or None
    )
    scheduler = (
        get_cosine_schedule_with_warmup(optimizer, cfg.warmup_steps, cfg.max_steps)
        if cfg.lr_schedule == "cosine"
        else get_constant_schedule_with_warmup(optimizer, cfg.warmup_steps)
    )
    return params, optimizer, scheduler


def _fused(params: list) -> bool:
    """Does torch's fused AdamW serve every parameter (floating point, on the CPU or a CUDA GPU)?
    One kernel over all tensors instead of a loop of small kernels per tensor, which on a small
    model is a visible part of every step; the update is the same up to float rounding."""
    return bool(params) and all(
        p.dtype.is_floating_point and p.device.type in ("cpu", "cuda") for p in params
    )


def load_trained(cfg: TrainSettings, folder: str | Path):
    """(model, processor) of saved weights: a full model folder, or a LoRA adapter on the base."""
    folder = Path(folder)
    if (folder / "adapter_config.json").exists():
        from peft import PeftModel  # deferred on purpose: heavy, and only LoRA weights need it

        base = load_model(cfg.model).load()
        return PeftModel.from_pretrained(base.model, folder).eval(), base.processor
    trained = load_model({"backend": "hf", "name": str(folder)}).load()
    return trained.model, trained.processor
