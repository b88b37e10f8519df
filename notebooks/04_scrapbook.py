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
# # 04 · Scrapbook
# > Generate a synthetic probing dataset: objects placed at absolute regions and relative positions,
# > templated questions (presence, counting, confirmation, recognition) in four forms, with answers
# > computed from each image's scene record and validation levels per concept.
#
# **Inputs:** params (shapes, or COCO / cut-out folders, background folders) · **Outputs:** `outputs/<run>/04_scrapbook/` (datasets/scrapbook and one
# datasets/<name> per further set, with counts and concept tables; figures, summary.json, provenance.json)

# %% [markdown]
# Opened as it is, this notebook runs the `demo` profile into `outputs/demo/` (after `make run`, it
# reads that run's earlier stages). Another profile: set `profile` below, or run
# `make stage STAGE=04_scrapbook PROFILE=<profile>`; the stage's values come from `params/`, never from here.

# %% tags=["parameters"]
profile: str = ""  # params/common.<profile>.yaml; empty: $VQALAB_PROFILE if set, else "demo"
run: str = ""  # outputs go to outputs/<run>/; empty: the profile's run
overrides: dict = {}  # config fields set on top of the profile, e.g. {"max_items": 50}

# %%
import pandas as pd
from IPython.display import Image, display

from lib import artifacts as A
from lib.config import resolve
from lib.scrapbook import ScrapbookConfig, explore
from lib.scrapbook import run as run_stage

resolved = resolve(ScrapbookConfig, profile, run or None, overrides)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it
dataset = A.dataset_folder(out, A.SCRAPBOOK_DATASET)

# %% [markdown]
# ## Generate
# Parameters are validated first; images, masks, scenes and questions are then streamed to disk,
# for the main dataset and for every further set named in `sets`.

# %%
stats = run_stage(cfg, out)
print(f"{stats['images']} images, {stats['questions']:,} questions; placement failures: {stats['placement_failures'] or 'none'}")
pd.DataFrame(stats["datasets"]).T

# %% [markdown]
# ## Sample images
# The dashed lines are the nine absolute regions; each unit adds the main object, then the
# reference object at one relative position to it, then the others.

# %%
Image(out / A.FIGURES / "samples.png")

# %% [markdown]
# ## Sample questions of each type, group and form

# %%
display(explore.sample_questions(dataset))

# %% [markdown]
# ## Counts
# Presence and counting questions come in equal numbers, as in the paper's section 5.2.

# %%
counts = pd.read_csv(dataset / "counts.csv")
display(counts.pivot_table(index=["type", "group"], columns="subgroup", values="questions", aggfunc="sum", fill_value=0))
Image(out / A.FIGURES / "question_counts.png")

# %% [markdown]
# ## Concepts enabled at levels 1 and 2
# A concept is enabled at a level when its presence questions have both yes and no answers and
# its counting questions both zero and non-zero answers (paper 5.1; Tables 3-6).

# %%
concepts = pd.read_csv(dataset / "concepts.csv")
display(concepts.pivot_table(index=["level", "concept", "value", "enabled"], columns="subgroup",
                             values="questions", aggfunc="sum", fill_value=0))

# %%
by_type = stats["by_type"]
if {"presence", "counting"} <= set(cfg.types):  # each presence query has its counting twin
    assert by_type.get("presence") == by_type.get("counting"), "presence and counting should come in equal numbers"
assert stats["images"] > 0 and stats["questions"] > 0
print(f"datasets -> {out / A.DATASETS}")
