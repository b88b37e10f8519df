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

# %% [markdown]
# Opened as it is, this notebook runs the `demo` profile into `outputs/demo/` (after `make run`, it
# reads that run's earlier stages). Another profile: set `profile` below, or run
# `make stage STAGE=05_train PROFILE=<profile>`; the stage's values come from `params/`, never from here.

# %% tags=["parameters"]
profile: str = ""  # params/common.<profile>.yaml; empty: $VQALAB_PROFILE if set, else "demo"
run: str = ""  # outputs go to outputs/<run>/; empty: the profile's run
overrides: dict = {}  # config fields set on top of the profile, e.g. {"max_items": 50}

# %%
import pandas as pd
from IPython.display import Image, display

from lib import artifacts as A
from lib import train
from lib.config import resolve

resolved = resolve(train.TrainConfig, profile, run or None, overrides)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it

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
