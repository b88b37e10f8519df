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
# # 03 · Adversarial filtering
# > Turn skeleton questions (question, image, correct options, MemeQA type) into hard multiple-choice
# > questions: a generator writes distractors, discriminators answer, questions still answered
# > correctly get new distractors (their earlier ones forbidden) until the discriminators are fooled.
#
# **Inputs:** 02's annotations (or a MemeQA JSON + images) · **Outputs:** `outputs/<run>/03_adversarial_filter/`
# (datasets/adversarial and datasets/adversarial_none_plus - the None- and None+ forms, dataset folders 06
# evaluates -, iterations.csv, memeqa/none-minus.json and none-plus.json, shortcuts.csv, state.json, figures,
# summary.json, provenance.json)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # option shuffles and generation seeds
skeletons_from: str = "annotations"  # "annotations" (stage 02) or a MemeQA JSON path
memeqa_images: str = ""  # the images folder of a MemeQA JSON
max_skeletons: int = 0  # 0: all
completion_blanks: int = 1  # smoke: one completion question per annotated sentence (the release: 2.5)
generator: dict = {"backend": "tiny", "name": "smollm2"}  # any text LLM (hf / openai / tiny)
discriminators: list = [{"backend": "tiny", "name": "llava"}]  # one or more VLM specs
combine: str = "vote"  # several discriminators: vote, or all must be fooled
blind_model: dict = {"backend": "tiny", "name": "smollm2"}  # text-only pass flagging questions answerable without the image ({}: none)
n_options: int = 4
none_of_the_above: bool = True
nota_position: str = "release"  # filter None- and derive None+ as the release did (NOTA at D, correct when no correct option is left); last / random: filter with an extra, never-correct NOTA
max_iterations: int = 3  # smoke: the seed ran 20
patience: int = 0  # stop when accuracy changed by < stable_tol for this many iterations (0: off)
stop_when_none_fooled: bool = False  # the original rule: stop once an iteration after the first fools nothing
stable_tol: float = 0.01
max_retries: int = 1  # smoke: one retry after an invalid reply
paraphrase_threshold: float = 0.9
min_length_ratio: float = 0.4  # generated distractors need this share of the correct options' words (length giveaway)
max_new_tokens: int = 64  # smoke: short replies (0: sized from the released distractor lengths)

# %%
import pandas as pd
from IPython.display import Image, display

from lib import af
from lib import artifacts as A
from lib.config import notebook_params
from lib.io import load_items
from lib.paths import stage_dir

cfg = af.AFConfig.from_params(notebook_params(af.AFConfig, globals()), source="notebook 03_adversarial_filter")
out = stage_dir(run, A.AF)

# %% [markdown]
# ## Skeletons

# %%
skeletons, skipped = af.skeletons_of(cfg, out.parent)
print(f"{len(skeletons)} skeletons, {len(skipped)} skipped (no correct option to keep)")
pd.Series([s.type for s in skeletons]).value_counts().rename("skeletons").to_frame()

# %% [markdown]
# ## Filter (resumable: state.json after every iteration), the blind check, the exports

# %%
summary = af.run(cfg, out)
display(A.read_table(out.parent, A.AF, A.ITERATIONS))
Image(out / A.FIGURES / "iterations.png") if (out / A.FIGURES / "iterations.png").exists() else None

# %%
items = load_items(A.dataset_folder(out, A.AF_DATASET))
table = pd.DataFrame([{"type": i.meta["type"], "fooled": i.meta["fooled"], "blind_answerable": i.meta.get("blind_answerable")}
                      for i in items])
display(table.groupby("type").agg(questions=("fooled", "size"), fooled=("fooled", "sum"),
                                  blind_answerable=("blind_answerable", "sum")))

# %% [markdown]
# ## None+ beside None-: one option removed, "None of the above" at D

# %%
plus = {i.id: i for i in load_items(A.dataset_folder(out, A.AF_DATASETS["none-plus"]))}
for item in items[:2]:
    print(f"None-: {item.options} answer {item.answer}\nNone+: {plus[item.id].options} answer {plus[item.id].answer}")

# %% [markdown]
# ## The shortcut audit: how often a text-only tell picks the answer, beside chance

# %%
pd.read_csv(out / A.SHORTCUTS)

# %% [markdown]
# ## A few questions' distractor histories

# %%
for item in items[:4]:
    print(f"[{item.meta['type']}] {item.question}  (fooled: {item.meta['fooled']}, accepted at {item.meta['accepted_iteration']})")
    for k, written in enumerate(item.meta["history"], start=1):
        print(f"   iteration {k}: {written}")
    print("   final:", [f"{'*' if i in item.answer else ' '}{o} <{g}>" for i, (o, g) in
                        enumerate(zip(item.options, item.meta["origins"]))])

# %%
assert summary["questions"] == len(items)
