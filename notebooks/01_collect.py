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
# # 01 · Collect
# > Gather images from the configured sources into one manifest (id = content hash, perceptual hash,
# > size, source, licence, labels and panel styles where known), report bad files and remove
# > duplicates by one documented rule.
#
# **Inputs:** the sources in `sources` · **Outputs:** `outputs/<run>/01_collect/` (manifest.jsonl, report.json, figures,
# datasets/yesbut when the images are labelled YesBut ones, summary.json, provenance.json)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # the YesBut completion options' A/B placement (collection itself is deterministic)
sources: list = [{"kind": "demo"}]  # each: {kind: demo | folder | yesbut | memeqa | urls | hf, ...}
near_duplicate_distance: int = 4  # perceptual-hash Hamming distance counted as a near copy (0: exact only)
yesbut_dataset: bool = True  # build datasets/yesbut when the manifest holds labelled YesBut images

# %%
import pandas as pd
from IPython.display import Image, display

from lib import artifacts as A
from lib import collect
from lib.config import notebook_params
from lib.paths import stage_dir

cfg = collect.CollectConfig.from_params(notebook_params(collect.CollectConfig, globals()), source="notebook 01_collect")
out = stage_dir(run, A.COLLECT)

# %% [markdown]
# ## Gather, deduplicate, merge into the manifest
# Exact copies (same SHA-256) and near copies (perceptual hash within `near_duplicate_distance`) of an
# earlier record are removed; "earlier" = the order of `sources`, then path. Re-collecting adds new
# images after the existing ones and keeps every existing id.

# %%
summary = collect.run(cfg, out, progress=True)
report = A.read_json(out.parent, A.COLLECT, A.COLLECT_REPORT)
display(pd.DataFrame(report["per_source"]))
print(f"{summary['collected']} collected, {summary['duplicates']} duplicates removed, {summary['kept']} kept")
display(pd.DataFrame(report["bad_files"])) if report["bad_files"] else print("no bad files")
display(pd.DataFrame(report["duplicates"])) if report["duplicates"] else None

# %% [markdown]
# ## Manifest

# %%
table = pd.DataFrame(A.read_manifest(out.parent))
display(table[["id", "name", "source", "width", "height", "label", "left_style", "right_style", "stage"]].head(20))
display(collect.totals(table))
Image(out / A.FIGURES / "sample.png")

# %%
assert summary["manifest"] == table["id"].nunique() > 0
