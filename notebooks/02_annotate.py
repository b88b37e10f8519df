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
# # 02 · Annotate
# > Annotate 01's two-panel images with YesBut's fields (and MemeQA's, where a project needs them):
# > interactively with the widget, or in a batch run from an annotation file. Then machine drafts,
# > agreement between annotators, style variants (YesBut stages 3 and 4) and their labels, statistics.
#
# **Inputs:** `outputs/<run>/01_collect/manifest.jsonl` · **Outputs:** `outputs/<run>/02_annotate/`
# (annotations.jsonl, agreement.csv, variants.jsonl, label_studio.json, figures, summary.json, provenance.json)

# %% [markdown]
# Opened as it is, this notebook runs the `demo` profile into `outputs/demo/` (after `make run`, it
# reads that run's earlier stages). Another profile: set `profile` below, or run
# `make stage STAGE=02_annotate PROFILE=<profile>`; the stage's values come from `params/`, never from here.

# %% tags=["parameters"]
profile: str = ""  # params/common.<profile>.yaml; empty: $VQALAB_PROFILE if set, else "demo"
run: str = ""  # outputs go to outputs/<run>/; empty: the profile's run
overrides: dict = {}  # config fields set on top of the profile, e.g. {"max_items": 50}

# %%
import pandas as pd
from IPython.display import display

from lib.config import resolve
from lib.families.yesbut.paper import figure3_counts
from lib.io import artifacts
from lib.pages.annotation_widget import AnnotationWidget
from lib.stages import annotate
from lib.stages.collect import totals

resolved = resolve(
    annotate.AnnotateConfig, profile, run or None, overrides
)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it
manifest = artifacts.read_manifest(out.parent)
panels = annotate.panels_to_annotate(manifest)
store = annotate.AnnotationStore(out / artifacts.ANNOTATIONS)
print(f"{len(panels)} two-panel images to annotate, {len(manifest)} images in the manifest")

# %% [markdown]
# ## Annotate
# In JupyterLab (a profile without `annotations_file`) the widget appears; each **save** is appended to
# `annotations.jsonl` at once - then run the cells below. In a batch run the annotation file is
# loaded instead (once: the store is append-only).

# %%
if not cfg.annotations_file:
    widget = AnnotationWidget(
        panels, store, fields=cfg.fields or annotate.FIELDS, annotator=cfg.annotator
    ).show()

# %%
loaded = annotate.load_annotations(
    cfg, out, panels
)  # the batch run's file, once (0 rows: none, or loaded before)
store.table().head(10)

# %% [markdown]
# ## Machine drafts
# Kept apart (`source = machine:<model>`), they never enter the human tables.

# %%
drafted = annotate.machine_drafts(cfg, out, panels)
drafts = store.latest(include_machine=True)
display(drafts[drafts["source"].str.startswith("machine:")].head(6))

# %% [markdown]
# ## Agreement (categorical fields, items with two or more annotators)

# %%
annotate.annotator_agreement(out)

# %% [markdown]
# ## Style variants (YesBut stages 3 and 4) and their labels

# %%
made = annotate.variants(cfg, out, panels)
print(
    f"{len(made['variants'])} variants ({made['source']}), {len(made['labelled'])} labelled, "
    f"{len(made['unlabelled'])} waiting for a label"
)

# %%
fig, ax = annotate.variants_figure(out, made["labelled"])
fig

# %% [markdown]
# ## 01's two-panel cuts, for a person to check

# %%
fig, ax = annotate.panel_cuts_figure(cfg, out, manifest)
fig

# %% [markdown]
# ## Label Studio export
# One task per two-panel image with every annotator's annotations, and the labelling config they fit.

# %%
tasks = annotate.label_studio(out, panels)
print(f"{len(tasks)} Label Studio tasks")
tasks[:1]

# %% [markdown]
# ## Statistics (YesBut Figure 3 and totals)

# %%
human = store.table()
if len(human):
    one = human.drop_duplicates(
        "item"
    )  # one annotation per image (the first annotator in file order)
    counts = figure3_counts(
        one.dropna(subset=["text_in_left", "text_in_right", "connected", "difficulty"])
    )
    display(pd.concat(counts, names=["figure 3", "value"]).rename("images").to_frame())
everything = pd.DataFrame(manifest + artifacts.read_variants(out.parent))
display(totals(everything[everything["label"].notna()]))

# %% [markdown]
# ## Summary and provenance

# %%
summary = annotate.finish(cfg, out, manifest, panels, loaded, drafted, made)
assert (out / artifacts.ANNOTATIONS).exists() or not cfg.annotations_file
summary
