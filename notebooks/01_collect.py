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
# # 01 · Collect
# > Gather images from the configured sources into one manifest (id = content hash, perceptual hash,
# > size, source, licence, labels and panel styles where known), report bad files and remove
# > duplicates by one documented rule.
#
# **Inputs:** the sources in `sources` · **Outputs:** `outputs/<run>/01_collect/` (manifest.jsonl, report.json, figures,
# datasets/yesbut when the images are labelled YesBut ones, summary.json, provenance.json)

# %% [markdown]
# Opened as it is, this notebook runs the `demo` profile into `outputs/demo/` (after `make run`, it
# reads that run's earlier stages). Another profile: set `profile` below, or run
# `make stage STAGE=01_collect PROFILE=<profile>`; the stage's values come from `params/`, never from here.

# %% tags=["parameters"]
profile: str = ""  # params/common.<profile>.yaml; empty: $VQALAB_PROFILE if set, else "demo"
run: str = ""  # outputs go to outputs/<run>/; empty: the profile's run
overrides: dict = {}  # config fields set on top of the profile, e.g. {"max_items": 50}

# %%
import pandas as pd
from IPython.display import display

from lib.config import resolve
from lib.stages import collect

resolved = resolve(
    collect.CollectConfig, profile, run or None, overrides
)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it

# %% [markdown]
# ## Gather every source
# Each source of `sources` in order; a bad file (empty, truncated, not an image) is reported by name, never ingested.

# %%
records, found = collect.gather_sources(cfg, out, progress=True)
display(pd.DataFrame(found["per_source"]))
display(pd.DataFrame(found["bad_files"])) if found["bad_files"] else print("no bad files")

# %% [markdown]
# ## Deduplicate, merge into the manifest
# Exact copies (same SHA-256) and near copies (perceptual hash within `near_duplicate_distance`) of an
# earlier record are removed; "earlier" = the order of `sources`, then path. Re-collecting adds new
# images after the existing ones and keeps every existing id.

# %%
manifest, report = collect.build_manifest(cfg, out, records, found)
print(
    f"{report['collected']} collected, {len(report['duplicates'])} duplicates removed, {report['kept']} kept"
)
display(pd.DataFrame(report["duplicates"])) if report["duplicates"] else None
table = pd.DataFrame(manifest)
display(
    table[
        ["id", "name", "source", "width", "height", "label", "left_style", "right_style", "stage"]
    ].head(20)
)
display(collect.totals(table))

# %% [markdown]
# ## Sample images

# %%
fig, ax = collect.sample_figure(out, manifest)
fig

# %% [markdown]
# ## Datasets
# A MemeQA source's questions, and the YesBut evaluation dataset (detection, understanding, completion)
# when the manifest holds labelled images; stage 06 evaluates them.

# %%
folders = collect.datasets(cfg, out, manifest)
folders

# %% [markdown]
# ## Summary and provenance

# %%
summary = collect.finish(cfg, out, manifest, report, folders)
assert summary["manifest"] == table["id"].nunique() > 0
