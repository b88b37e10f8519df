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
# # 03 · Adversarial filtering
# > Turn skeleton questions (question, image, correct options, MemeQA type) into hard multiple-choice
# > questions: a generator writes distractors, discriminators answer, questions still answered
# > correctly get new distractors (their earlier ones forbidden) until the discriminators are fooled.
#
# **Inputs:** 02's annotations (or a MemeQA JSON + images) · **Outputs:** `outputs/<run>/03_adversarial_filter/`
# (datasets/adversarial and datasets/adversarial_none_plus - the None- and None+ forms, dataset folders 06
# evaluates -, iterations.csv, memeqa/none-minus.json and none-plus.json, shortcuts.csv, state.json, figures,
# summary.json, provenance.json)

# %% [markdown]
# Opened as it is, this notebook runs the `demo` profile into `outputs/demo/` (after `make run`, it
# reads that run's earlier stages). Another profile: set `profile` below, or run
# `make stage STAGE=03_adversarial_filter PROFILE=<profile>`; the stage's values come from `params/`, never from here.

# %% tags=["parameters"]
profile: str = ""  # params/common.<profile>.yaml; empty: $VQALAB_PROFILE if set, else "demo"
run: str = ""  # outputs go to outputs/<run>/; empty: the profile's run
overrides: dict = {}  # config fields set on top of the profile, e.g. {"max_items": 50}

# %%
import pandas as pd
from IPython.display import display

from lib.config import resolve
from lib.io import load_items
from lib.stages import adversarial_filter as stage

resolved = resolve(stage.AFConfig, profile, run or None, overrides)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it

# %% [markdown]
# ## Skeletons

# %%
skeletons, skipped = stage.skeletons_of(cfg, out.parent)
print(f"{len(skeletons)} skeletons, {len(skipped)} skipped (no correct option to keep)")
pd.Series([s.type for s in skeletons]).value_counts().rename("skeletons").to_frame()

# %% [markdown]
# ## Filter
# Resumable: the loop writes state.json after every iteration, and a rerun with the same settings goes on from it.

# %%
state = stage.filter_skeletons(cfg, out, skeletons)
print(f"{state['iteration']} iterations; {len(state['questions'])} questions")

# %% [markdown]
# ## Iterations: discriminator accuracy and fooled questions

# %%
iterations, (fig, ax) = stage.iteration_table(out, state)
display(iterations)
fig

# %% [markdown]
# ## The filtered questions and the blind check
# A question the blind model answers without its image is marked `blind_answerable`.

# %%
items = stage.questions(cfg, state)
table = pd.DataFrame(
    [
        {
            "type": i.meta["type"],
            "fooled": i.meta["fooled"],
            "blind_answerable": i.meta.get("blind_answerable"),
        }
        for i in items
    ],
    columns=["type", "fooled", "blind_answerable"],
)  # columns: an empty run shows 0 rows
display(
    table.groupby("type").agg(
        questions=("fooled", "size"),
        fooled=("fooled", "sum"),
        blind_answerable=("blind_answerable", "sum"),
    )
)

# %% [markdown]
# ## Datasets and MemeQA exports: None+ beside None-, one option removed, "None of the above" at D

# %%
variants, folders = stage.datasets(cfg, out, items)
plus = {i.id: i for i in variants.get("none-plus", [])}
for item in [i for i in items[:2] if i.id in plus]:
    print(
        f"None-: {item.options} answer {item.answer}\nNone+: {plus[item.id].options} answer {plus[item.id].answer}"
    )
folders

# %% [markdown]
# ## The shortcut audit: how often a text-only tell picks the answer, beside chance

# %%
audits, shortcut_table = stage.shortcut_audit(cfg, out, variants)
shortcut_table

# %% [markdown]
# ## A few questions' distractor histories

# %%
for item in items[:4]:
    print(
        f"[{item.meta['type']}] {item.question}  (fooled: {item.meta['fooled']}, accepted at {item.meta['accepted_iteration']})"
    )
    for k, written in enumerate(item.meta["history"], start=1):
        print(f"   iteration {k}: {written}")
    print(
        "   final:",
        [
            f"{'*' if i in item.answer else ' '}{o} <{g}>"
            for i, (o, g) in enumerate(zip(item.options, item.meta["origins"]))
        ],
    )

# %% [markdown]
# ## Summary and provenance

# %%
summary = stage.finish(cfg, out, skeletons, skipped, iterations, items, folders, audits)
assert summary["questions"] == len(items) == len(load_items(folders["none-minus"]))
