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
# **Inputs:** a dataset folder (04's Scrapbook sets in the demo) · **Outputs:** `outputs/<run>/05_train/` (best/ and last/
# weights, checkpoint/, curve.csv, figures, summary.json, provenance.json)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # data split, batch order and initialisation
model: dict = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8, "question_first": True}  # smoke: the tiny VLM, question first
dataset: str = "stage:04_scrapbook/datasets/scrapbook"  # smoke: 04's set; any dataset folder, stage:... path or MemeQA JSON
val_dataset: str = ""  # with test_dataset: the dataset's own splits (e.g. MemeQA's dev.json); empty: split by image
test_dataset: str = ""
memeqa_images: str = ""  # the images folder of MemeQA JSON splits
select_by: str = "auto"  # the validation metric picking best/: auto (MemeQA: macro over types), accuracy, macro
train_types: list = []  # train only on these question types (empty: all); evaluation keeps every type
train_targets: list = []  # train only on questions about these attributes, e.g. ["color"] (empty: all)
focus_targets: list = []  # curriculum: first train only on these attributes' questions, e.g. ["color"]
focus_steps: int = 0  # ... for this many steps, then on all training questions
full_finetune: bool = True  # smoke: the tiny model is random, train it all; real checkpoints: LoRA (False)
lora_r: int = 16  # LoRA rank (when full_finetune is False)
lora_alpha: int = 32
lora_dropout: float = 0.05
lr: float = 1e-3  # smoke (a random tiny model); AdamW peak learning rate, after warm-up
lr_schedule: str = "cosine"  # cosine decay, or constant (the original MemeQA runs)
warmup_steps: int = 5  # smoke
max_steps: int = 10  # smoke: seconds; the demo profile trains for minutes
epochs: float = 0.0  # > 0: the budget in passes over the training split (max_steps derived)
mixed_precision: str = "auto"  # auto (bf16 where the GPU has it), no, bf16, fp16
val_max_new_tokens: int = 8  # validation answers: tokens at most (a closed answer set needs few)
max_seconds: float = 0.0  # stop after this much training time (0: no limit)
batch_size: int = 8  # smoke
grad_accum: int = 1
eval_every: int = 5  # smoke; validate by generation every k steps
checkpoint_every: int = 5  # smoke; save the resumable state every k steps
eval_items: int = 32  # smoke; validation questions per evaluation
max_test: int = 200  # smoke; held-out questions for the base / trained / majority comparison

# %%
import pandas as pd
from IPython.display import Image, display

from lib import artifacts as A
from lib import train
from lib.config import notebook_params
from lib.paths import stage_dir

cfg = train.TrainConfig.from_params(notebook_params(train.TrainConfig, globals()), source="notebook 05_train")
out = stage_dir(run, A.TRAIN)

# %% [markdown]
# ## Train, then compare base vs trained vs majority answer on held-out images
# Splits are disjoint by image; validation and test use level-1 questions. Validation asks, reads
# and scores each question as stage 06 will (the items' task).

# %%
summary = train.run(cfg, out)
training = summary["training"]
print(f"{training['steps']} steps in {training['train_seconds']} s, {training['tokens_per_second']:,.0f} tokens/s")

# %% [markdown]
# ## Training curve

# %%
Image(out / A.FIGURES / "training_curve.png")

# %% [markdown]
# ## Base vs trained vs majority answer

# %%
table = pd.DataFrame({k: summary[k] for k in ("majority", "base", "trained")}).T
display(table.style.format("{:.3f}"))
Image(out / A.FIGURES / "base_vs_trained.png")

# %%
assert (out / A.BEST).is_dir() and (out / A.LAST).is_dir()
for key in ("accuracy_presence", "accuracy_presence_color", "accuracy_presence_shape"):
    print(f"{key}: trained {summary['trained'].get(key, float('nan')):.3f}, base {summary['base'].get(key, float('nan')):.3f}, "
          f"majority {summary['majority'].get(key, float('nan')):.3f}")
