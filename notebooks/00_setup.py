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
# # 00 · Setup
# > Build the embedded models once, write the sample images, and probe every model of the profile
# > through the call cache, so a broken environment fails here in seconds.
#
# **Inputs:** model specs (params) · **Outputs:** `outputs/<run>/00_setup/` (probe.csv, images/, datasets/ of the demo,
# summary.json, provenance.json)

# %% [markdown]
# Opened as it is, this notebook runs the `demo` profile into `outputs/demo/` (after `make run`, it
# reads that run's earlier stages). Another profile: set `profile` below, or run
# `make stage STAGE=00_setup PROFILE=<profile>`; the stage's values come from `params/`, never from here.

# %% tags=["parameters"]
profile: str = ""  # params/common.<profile>.yaml; empty: $VQALAB_PROFILE if set, else "demo"
run: str = ""  # outputs go to outputs/<run>/; empty: the profile's run
overrides: dict = {}  # config fields set on top of the profile, e.g. {"max_items": 50}

# %%
from IPython.display import display

from lib.config import resolve
from lib.stages import setup

resolved = resolve(setup.SetupConfig, profile, run or None, overrides)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it

# %% [markdown]
# ## Sample images
# Real photographs from scikit-image, used for probing here and as demo material later.

# %%
images = setup.sample_images(out)
images

# %% [markdown]
# ## Probe every model
# Each model is built once (into `outputs/cache/`) and asked a few questions through the call cache. Choices
# are answered by constrained decoding (token trie) or option log-likelihood, so even an untrained tiny model
# gives a valid answer there; its free text is noise until stage 05 trains it.

# %%
answers = setup.probe(cfg, out, images)
display(answers)

# %% [markdown]
# ## Demo datasets
# The embedded multiple-choice, open-answer and YesBut sets stage 06 evaluates (when `demo_datasets` is on).

# %%
folders = setup.datasets(cfg, out)
folders

# %% [markdown]
# ## Summary and provenance

# %%
summary = setup.finish(cfg, out, images, answers, folders)
assert summary["constrained_invalid"] == 0, "a constrained answer was invalid: see the probe table"
print(
    f"{summary['probe_answers']} probe answers from {summary['models']} models; demo datasets: "
    f"{', '.join(summary['datasets']) or 'none'} -> {out}"
)
