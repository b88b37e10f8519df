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
# # 02 · Annotate
# > Annotate 01's two-panel images with YesBut's fields (and MemeQA's, where a project needs them):
# > interactively with the widget, or in a batch run from an annotation file. Then machine drafts,
# > agreement between annotators, style variants (YesBut stages 3 and 4) and their labels, statistics.
#
# **Inputs:** `outputs/<run>/01_collect/manifest.jsonl` · **Outputs:** `outputs/<run>/02_annotate/`
# (annotations.jsonl, agreement.csv, variants.jsonl, label_studio.json, statistics, figures)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # unused (annotation is deterministic); kept for the common parameters
annotations_file: str = "lib/data/demo/annotations.yaml"  # batch runs: load these; empty: annotate with the widget
annotator: str = ""  # the widget's default annotator name
fields: list = []  # the widget's fields (empty: all of lib/annotate.py FIELDS)
preannotate_model: dict = {"backend": "tiny", "name": "llava"}  # VLM drafting descriptions ({} for none)
variants_api: dict = {}  # images API for style variants, e.g. {model: dall-e-3, api_key_env: OPENAI_API_KEY}; {}: local stylizer
variant_labels_file: str = "lib/data/demo/variant_labels.yaml"  # satirical labels of the variants (empty: the widget)
stages: list = [3, 4]  # which style stages to generate

# %%
import pandas as pd
import yaml
from IPython.display import display

from lib import annotate, plots
from lib.io import read_jsonl, write_json, write_jsonl
from lib.models import load_model
from lib.paths import ROOT, stage_dir
from lib.provenance import write_provenance
from lib.store import CallStore

out = stage_dir(run, "02_annotate")
manifest = list(read_jsonl(stage_dir(run, "01_collect", create=False) / "manifest.jsonl"))
panels = [r for r in manifest if r.get("label") is not None and r.get("stage") == 2]
store = annotate.AnnotationStore(out / "annotations.jsonl")
print(f"{len(panels)} two-panel images to annotate, {len(manifest)} images in the manifest")

# %% [markdown]
# ## Annotate
# In JupyterLab (no `annotations_file`) the widget appears; each **save** is appended to
# `annotations.jsonl` at once. In a batch run the annotation file is loaded instead.

# %%
if annotations_file:
    path = ROOT / annotations_file if not annotations_file.startswith("/") else annotations_file
    if not store.rows()["source"].eq("human").any():  # load once: the store is append-only
        n = annotate.load_annotation_file(path, store, names={r["name"]: r["id"] for r in panels})
        print(f"loaded {n} annotation rows from {annotations_file}")
else:
    widget = annotate.AnnotationWidget(panels, store, fields=fields or annotate.FIELDS, annotator=annotator).show()

# %%
table = store.table()
table.head(10)

# %% [markdown]
# ## Machine drafts (kept apart: `source = machine:<model>`)

# %%
if preannotate_model and panels:
    model = load_model(preannotate_model)
    done = store.rows()["source"].eq(f"machine:{model.name}").any()  # a rerun appends no second copy
    n = 0 if done else annotate.preannotate(model, panels, store, call_store=CallStore.default(), max_new_tokens=24,
                                            progress=False)
    drafts = store.latest(include_machine=True)
    drafts = drafts[drafts["source"].str.startswith("machine:")]
    print(f"{n} machine rows appended; drafts never enter the human tables")
    display(drafts.head(6))

# %% [markdown]
# ## Agreement (categorical fields, items with two or more annotators)

# %%
agreement = annotate.agreement(store)
agreement.to_csv(out / "agreement.csv", index=False)
agreement

# %% [markdown]
# ## Style variants (YesBut stages 3 and 4) and their labels

# %%
api = annotate.ImageAPI(cache=out / "api_cache", **variants_api) if variants_api else None
first = store.table().drop_duplicates("item").set_index("item")
descriptions = {i: {k: first.loc[i].get(k) for k in ("left_description", "right_description")} for i in first.index}
satirical = [r for r in panels if r["label"] == "satirical"]
variants = annotate.style_variants(satirical, descriptions, out / "variants", api=api, stages=stages, progress=False)
labels = yaml.safe_load((ROOT / variant_labels_file).read_text()) if variant_labels_file else {}
labelled, unlabelled = annotate.apply_labels(variants, labels)
write_jsonl(out / "variants.jsonl", labelled)
print(f"{len(variants)} variants ({'API ' + api.model if api else 'local stylizer'}), {len(labelled)} labelled, "
      f"{len(unlabelled)} waiting for a label")
if labelled:
    from PIL import Image

    fig, _ = plots.image_grid([Image.open(v["path"]) for v in labelled[:6]],
                              [f"{v['left_style']}|{v['right_style']} {v['label']}" for v in labelled[:6]], cols=3,
                              grid_lines=False)
    plots.save(fig, out / "figures", "variants")

# %% [markdown]
# ## Statistics (YesBut Figure 3 and totals)

# %%
human = store.table()
if len(human):
    one = human.drop_duplicates("item")  # one annotation per image (the first annotator in file order)
    counts = annotate.figure3_counts(one.dropna(subset=["text_in_left", "text_in_right", "connected", "difficulty"]))
    display(pd.concat(counts, names=["figure 3", "value"]).rename("images").to_frame())
from lib.collect import totals  # noqa: E402

everything = pd.DataFrame(manifest + labelled)
display(totals(everything[everything["label"].notna()]))

# %%
write_json(out / "label_studio.json", annotate.export_label_studio(store, {r["id"]: r["path"] for r in panels}))
write_provenance(out, "02_annotate", {"run": run, "annotations_file": annotations_file, "stages": stages,
                                      "preannotate_model": preannotate_model, "variants_api": bool(variants_api)}, seed)
assert (out / "annotations.jsonl").exists() or not annotations_file
