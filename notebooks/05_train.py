# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     notebook_metadata_filter: kernelspec,jupytext
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
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
from IPython.display import display

from lib.config import resolve
from lib.io import artifacts
from lib.stages import train

resolved = resolve(train.TrainConfig, profile, run or None, overrides)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it

# %% [markdown]
# ## Datasets
# The dataset fields name earlier stages' folders (`stage:04_scrapbook/...`); resolved against this run,
# they are what training reads and provenance records.

# %%
cfg = train.bind_datasets(cfg, out)
{k: getattr(cfg, k) for k in ("dataset", "val_dataset", "test_dataset")}

# %% [markdown]
# ## Train
# Splits are disjoint by image; validation and test use level-1 questions. Validation asks, reads
# and scores each question as stage 06 will (the items' task). A rerun with the same settings resumes.

# %%
training = train.train(cfg, out, resume=cfg.resume)
print(
    f"{training['steps']} steps in {training['train_seconds']} s, {training['tokens_per_second']:,.0f} tokens/s"
)

# %% [markdown]
# ## Training curve

# %%
curve, (fig, ax) = train.curve(out)
fig

# %% [markdown]
# ## Base vs trained vs majority answer vs blank pictures on held-out images
#
# The trained model must rise above the answer prior (the majority answer) and above what the
# question alone tells it (itself asked about blank pictures): its margins over each, per question
# type, with paired intervals over images.

# %%
result, (fig, ax) = train.comparison(cfg, out)
display(pd.DataFrame({k: result[k] for k in train.SYSTEMS}).T.style.format("{:.3f}"))
display(pd.DataFrame(result["margins"]))
fig

# %% [markdown]
# ## Summary and provenance

# %%
summary = train.finish(cfg, out, training, result)
assert (out / artifacts.BEST).is_dir() and (out / artifacts.LAST).is_dir()
for key in ("accuracy_presence", "accuracy_presence_color", "accuracy_presence_shape"):
    print(
        f"{key}: trained {summary['trained'].get(key, float('nan')):.3f}, base {summary['base'].get(key, float('nan')):.3f}, "
        f"majority {summary['majority'].get(key, float('nan')):.3f}"
    )
