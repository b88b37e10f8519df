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
from IPython.display import display

from lib.config import resolve
from lib.families.scrapbook import explore
from lib.io import artifacts
from lib.stages import scrapbook as stage
from lib.stages.scrapbook import ScrapbookConfig

resolved = resolve(ScrapbookConfig, profile, run or None, overrides)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it
dataset = artifacts.dataset_folder(out, artifacts.SCRAPBOOK_DATASET)

# %% [markdown]
# ## Generate
# Parameters are validated first; images, masks, scenes and questions are then streamed to disk.

# %%
stats = stage.main_dataset(cfg, out)
print(
    f"{stats['images']} images, {stats['questions']:,} questions; placement failures: {stats['placement_failures'] or 'none'}"
)

# %% [markdown]
# ## Sample images
# The dashed lines are the nine absolute regions; each unit adds the main object, then the
# reference object at one relative position to it, then the others.

# %%
fig, ax = stage.sample_figure(cfg, out)
fig

# %% [markdown]
# ## Sample questions of each type, group and form

# %%
display(explore.sample_questions(dataset))

# %% [markdown]
# ## Counts
# Presence and counting questions come in equal numbers, as in the paper's section 5.2.

# %%
counts, (fig, ax) = stage.question_counts(out)
display(
    counts.pivot_table(
        index=["type", "group"], columns="subgroup", values="questions", aggfunc="sum", fill_value=0
    )
)
fig

# %% [markdown]
# ## Concepts enabled at levels 1 and 2
# A concept is enabled at a level when its presence questions have both yes and no answers and
# its counting questions both zero and non-zero answers (paper 5.1; Tables 3-6).

# %%
concepts = pd.read_csv(dataset / "concepts.csv")
display(
    concepts.pivot_table(
        index=["level", "concept", "value", "enabled"],
        columns="subgroup",
        values="questions",
        aggfunc="sum",
        fill_value=0,
    )
)

# %% [markdown]
# ## Further sets
# Every other Scrapbook dataset of the run, one per entry of `sets` (the scenes stage 05 trains on, a fresh set 06 evaluates).

# %%
sets = stage.further_sets(cfg, out)
pd.DataFrame(sets).T if sets else print("no further sets")

# %% [markdown]
# ## Beside the paper
# With `compare_to_paper` on (the main dataset has Table 2's parameters), its Unique All counts beside the paper's.

# %%
paper = stage.paper_table(cfg, out)
paper if paper is not None else print("compare_to_paper is off")

# %% [markdown]
# ## Summary and provenance

# %%
summary = stage.finish(cfg, out, stats, sets)
by_type = summary["by_type"]
if {"presence", "counting"} <= set(cfg.types):  # each presence query has its counting twin
    assert by_type.get("presence") == by_type.get("counting"), (
        "presence and counting should come in equal numbers"
    )
assert summary["images"] > 0 and summary["questions"] > 0
pd.DataFrame(summary["datasets"]).T
