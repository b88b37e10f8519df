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
# **Inputs:** the sources in `sources` · **Outputs:** `outputs/<run>/01_collect/` (manifest.jsonl, report.json, figures)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # unused here (collection is deterministic); kept for the common parameters
sources: list = [{"kind": "demo"}]  # each: {kind: demo | folder | yesbut | memeqa | urls | hf, ...}
near_duplicate_distance: int = 4  # perceptual-hash Hamming distance counted as a near copy (0: exact only)

# %%
import pandas as pd
from IPython.display import display
from PIL import Image

from lib import collect, plots
from lib.io import read_jsonl, write_json, write_jsonl
from lib.provenance import write_provenance
from lib.paths import stage_dir

out = stage_dir(run, "01_collect")



# %% [markdown]
# ## Gather

# %%
records, bad = [], []
for source in sources:
    recs, report = collect.gather(source, out)
    records += recs
    bad += [{"source": source["kind"], "file": f, "reason": why} for f, why in report.skipped]
    print(f"{source['kind']}: {len(recs)} images, {len(report.skipped)} bad files")
display(pd.DataFrame(bad)) if bad else print("no bad files")

# %% [markdown]
# ## Duplicates
# Exact copies (same SHA-256) and near copies (perceptual hash within `near_duplicate_distance`) of an
# earlier record are removed; "earlier" = the order of `sources`, then path.

# %%
kept, dropped = collect.deduplicate(records, near=near_duplicate_distance)
print(f"{len(records)} collected, {len(dropped)} duplicates removed, {len(kept)} kept")
display(pd.DataFrame(dropped)) if dropped else None

# %% [markdown]
# ## Manifest
# Re-collecting adds new images after the existing ones and keeps every existing id.

# %%
manifest_path = out / "manifest.jsonl"
existing = list(read_jsonl(manifest_path)) if manifest_path.exists() else []
manifest = collect.merge_manifest(existing, kept)
write_jsonl(manifest_path, manifest)
write_json(out / "report.json", {"collected": len(records), "kept": len(kept), "bad_files": bad, "duplicates": dropped})
table = pd.DataFrame(manifest)
display(table[["id", "name", "source", "width", "height", "label", "left_style", "right_style", "stage"]].head(20))

# %%
display(collect.totals(table))
sample = table.head(6)
fig, _ = plots.image_grid([Image.open(p) for p in sample["path"]], list(sample["name"]), cols=3, grid_lines=False)
plots.save(fig, out / "figures", "sample")

# %%
write_provenance(out, "01_collect", {"run": run, "sources": sources, "near_duplicate_distance": near_duplicate_distance},
                 seed)
assert len(manifest) == len({r["id"] for r in manifest}) > 0
