# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     notebook_metadata_filter: kernelspec,jupytext
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Train
# > Fine-tune a VLM (LoRA with peft, or full fine-tuning for a randomly initialised model) on a
# > project dataset, validating with the task's own metric, and compare base vs trained vs the
# > majority answer on held-out images.
#
# **Inputs:** a dataset folder (or Scrapbook parameters to generate one) · **Outputs:** `outputs/<run>/05_train/` (best/ and last/ weights, curve.csv, summary.json, figures)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # data split, batch order and initialisation
model: dict = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8, "question_first": True}  # any hf / tiny VLM spec
dataset: str = ""  # a dataset folder; empty: generate a Scrapbook training set from `scrapbook`
scrapbook: dict = {"canvas": [224, 224], "size_start": 40, "size_step": 10, "n_sets": 1, "n_backgrounds": 1,
                   "n_arrangements": 1, "n_region_pairs": 4, "n_questions_per_type": 1, "types": ["presence", "counting"],
                   "groups": ["np"], "forms": ["original"]}  # smoke: a few dozen images
train_types: list = []  # train only on these question types (empty: all); evaluation keeps every type
train_targets: list = []  # train only on questions about these attributes, e.g. ["color"] (empty: all)
focus_targets: list = []  # curriculum: first train only on these attributes' questions, e.g. ["color"]
focus_steps: int = 0  # ... for this many steps, then on all training questions
full_finetune: bool = True  # the tiny model is random: train it all; real checkpoints: LoRA (False)
lora_r: int = 16  # LoRA rank (when full_finetune is False)
lr: float = 1e-3  # AdamW peak learning rate, after warm-up, cosine decay
warmup_steps: int = 5
max_steps: int = 10  # smoke: seconds; the demo profile trains for minutes
max_seconds: float = 0.0  # stop after this much training time (0: no limit)
batch_size: int = 8
grad_accum: int = 1
eval_every: int = 5  # validate by generation every k steps
eval_items: int = 32  # validation questions per evaluation
max_test: int = 200  # held-out questions for the base / trained / majority comparison

# %%
import json

import pandas as pd
from IPython.display import display

from lib import plots
from lib.io import write_json
from lib.paths import stage_dir
from lib.provenance import write_provenance
from lib.scrapbook import ScrapbookParams, generate
from lib.train import TrainConfig, compare, train

out = stage_dir(run, "05_train")

# %% [markdown]
# ## Data
# Splits are disjoint by image; validation and test use level-1 questions.

# %%
if not dataset:
    stats = generate(ScrapbookParams.from_dict({**scrapbook, "seed": seed}), out / "data", progress=False)
    dataset = str(out / "data")
    print(f"generated {stats['images']} images, {stats['questions']:,} questions")
cfg = TrainConfig(model=model, dataset=dataset, train_types=train_types, train_targets=train_targets,
                  focus_targets=focus_targets, focus_steps=focus_steps,
                  full_finetune=full_finetune, lora_r=lora_r, lr=lr,
                  warmup_steps=warmup_steps, max_steps=max_steps, max_seconds=max_seconds, batch_size=batch_size,
                  grad_accum=grad_accum, eval_every=eval_every, eval_items=eval_items, checkpoint_every=eval_every,
                  seed=seed)

# %% [markdown]
# ## Train

# %%
summary = train(cfg, out, resume=False)
print(f"{summary['steps']} steps in {summary['train_seconds']} s, {summary['tokens_per_second']:,.0f} tokens/s")

# %% [markdown]
# ## Training curve

# %%
curve = pd.read_csv(out / "curve.csv")
fig, _ = plots.training_curve(curve)
plots.save(fig, out / "figures", "training_curve")

# %% [markdown]
# ## Base vs trained vs majority answer, on held-out images

# %%
result = compare(cfg, out, max_test=max_test)
table = pd.DataFrame({k: result[k] for k in ("majority", "base", "trained")}).T
display(table.style.format("{:.3f}"))
fig, _ = plots.accuracy_bars(table)
plots.save(fig, out / "figures", "base_vs_trained")

# %% [markdown]
# ## Save

# %%
write_json(out / "summary.json", {"base": result["base"], "trained": result["trained"], "majority": result["majority"],
                                  "train_seconds": summary["train_seconds"], "n_test": result["n_test"],
                                  "training": summary})
write_provenance(out, "05_train", {"run": run, **json.loads(json.dumps(summary["config"]))}, seed)
assert (out / "best").is_dir() and (out / "last").is_dir()
for key in ("accuracy_presence", "accuracy_presence_color", "accuracy_presence_shape"):
    print(f"{key}: trained {result['trained'].get(key, float('nan')):.3f}, base {result['base'].get(key, float('nan')):.3f}, "
          f"majority {result['majority'].get(key, float('nan')):.3f}")
