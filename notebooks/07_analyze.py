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
# # 07 · Analyze
# > Maps of image and text embeddings (UMAP / t-SNE, with a separation score), BERTopic topics, the
# > papers' figures and tables from the earlier stages' outputs, and the run's HTML report.
#
# **Inputs:** whatever `outputs/<run>/0N_*` holds (absent stages are reported, not fatal) · **Outputs:**
# `outputs/<run>/07_analyze/` (figures/, tables/) and `outputs/<run>/report.html`

# %% [markdown]
# Opened as it is, this notebook runs the `demo` profile into `outputs/demo/` (after `make run`, it
# reads that run's earlier stages). Another profile: set `profile` below, or run
# `make stage STAGE=07_analyze PROFILE=<profile>`; the stage's values come from `params/`, never from here.

# %% tags=["parameters"]
profile: str = ""  # params/common.<profile>.yaml; empty: $VQALAB_PROFILE if set, else "demo"
run: str = ""  # outputs go to outputs/<run>/; empty: the profile's run
overrides: dict = {}  # config fields set on top of the profile, e.g. {"max_items": 50}

# %%
import pandas as pd
from IPython.display import display

from lib.config import resolve
from lib.io import artifacts
from lib.pages import agreement_view
from lib.stages import analyze

resolved = resolve(
    analyze.AnalyzeConfig, profile, run or None, overrides
)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it
{stage: (out.parent / stage).is_dir() for stage in artifacts.STAGES[:-1]}

# %% [markdown]
# ## Image map (YesBut Figure 4): collected images and style variants
# Every earlier stage's outputs are read through `lib.io.artifacts`; a stage that did not run is
# skipped here and marked absent in the report. The silhouette says how well the groups separate.

# %%
images, maps = analyze.image_map(cfg, out)
display(pd.Series(images["silhouette"] if images else {}, name="silhouette").to_frame())
for fig, _ax in maps.values():
    display(fig)

# %% [markdown]
# ## Generated vs reference answers (the Docmatix post's Figure 1)

# %%
answers, (fig, ax) = analyze.answer_map(cfg, out)
print(f"{len(answers)} open answers and references")
fig

# %% [markdown]
# ## Topics (BERTopic on descriptions, answers and LAVE rationales)

# %%
found, (fig, ax) = analyze.topic_model(cfg, out, answers)
display(found["table"]) if found["table"] is not None else print(f"no topics: {found['topics']}")
fig

# %% [markdown]
# ## The papers' figures (annotations, the YesBut release, adversarial filtering)

# %%
drawn = analyze.data_figures(cfg, out)
for fig, _ax in drawn.values():
    display(fig)

# %% [markdown]
# ## The papers' tables and the tasks' figures

# %%
tables, task_figures = analyze.result_tables(cfg, out)
for name, table in tables.items():
    print(name)
    display(table.head(20))
for fig in task_figures.values():
    display(fig)

# %% [markdown]
# ## The papers' stated numbers beside ours (YesBut with its repository, MemeQA's release)

# %%
reproduced = analyze.paper_table(cfg, out)
display(reproduced) if reproduced is not None else print(
    "no paper numbers for this run (no YesBut or MemeQA data)"
)

# %% [markdown]
# ## Compared with another run (`compare_with`)
# Every answer both runs gave is paired; a changed one is put on its first cause (prompt, model,
# reading, scoring). The report counts them and links each count to those answers in the item
# browser, both runs side by side; without `compare_with` this step does nothing.

# %%
compared = analyze.comparison(cfg, out)
display(artifacts.read_comparison(out.parent)["tables"]["causes"]) if compared else print(
    "compare_with is not set: no comparison"
)

# %% [markdown]
# ## Which score agrees with people (`human_labels`)
# Every text metric of the labelled answers' task and every judge of the run's stage 06, held to
# people's verdicts: ROC AUC and Kendall tau-b, and for a judge Cohen's kappa and Krippendorff's
# alpha, each with its interval over the images (flagged where too few images hold one). Without
# `human_labels` this step does nothing.

# %%
agreed = analyze.human_agreement(cfg, out)
display(
    agreement_view.agreement_rows(agreement_view.read_agreed(out.parent)["agreement"])
) if agreed else print("human_labels is not set: no agreement with people")

# %% [markdown]
# ## Item quality: which items are good
# Every answer of this run's stage 06 (and of `compare_with`'s) pooled per item: the share right,
# discrimination, the most common wrong answer, and the flags (saturated, never right, negative
# discrimination, agreed wrong). The 2PL fit and the subset check say when too few respondents
# answered. The report shows the flagged items with their images; the browser filters by flag.

# %%
items = analyze.item_quality(cfg, out)
if items is not None:
    display(items.datasets())
    fig, _ax = items.figures["item_difficulty"]
    display(fig)
else:
    print("no item quality: stage 06 has no answers for this run, or they are stale")

# %% [markdown]
# ## Summary, provenance and the report

# %%
summary = analyze.finish(cfg, out, images, answers, found, tables, compared, items)
print(f"report: {summary['report']}")
assert (out.parent / artifacts.REPORT).exists()
