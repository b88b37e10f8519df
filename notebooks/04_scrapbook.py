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

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # one seed for the whole dataset; every unit derives its own RNG from it
objects: str = "shapes"  # shapes | cutouts | coco
object_selection: str = "deterministic"  # deterministic sliding window | random
class_selection: str = "unique"  # same | unique | random
color_selection: str = "unique"
size_selection: str = "unique"
n_sets: int = 1  # S: object sets (smoke: 1; paper: 3)
objects_per_set: int = 3  # N (smoke: 3; paper: 5)
n_backgrounds: int = 1  # B per set (smoke: 1; paper: 3)
n_arrangements: int = 1  # A: (main, reference) pairs per background (smoke: 1; paper: 2)
objects_per_image: int = 3  # x: objects added one by one (one image per step)
n_region_pairs: int = 2  # P: pairs of absolute regions per arrangement (smoke: 2; paper: 3)
n_questions_per_type: int = 1  # paraphrases per query (smoke: 1; paper: 3)
backgrounds: str = "plain"  # plain, samples, or a folder of images at least 500x500
cutouts_dir: str = ""  # for cut-out objects: a folder of <class>/*.png
coco_images: str = ""  # for COCO objects: the val2017/ folder
coco_annotations: str = ""  # for COCO objects: instances_val2017.json
canvas: list = [1280, 768]  # image width and height (the paper's plain-background size)
size_start: int = 70  # first object's box side; each further object grows by size_step
size_step: int = 40
types: list = ["presence", "counting", "confirmation", "recognition"]  # question types to generate
groups: list = ["np", "abs", "rel"]  # no position, absolute region, relative position
forms: list = ["original", "condition", "direction", "enumerated"]
n_preview: int = 6  # images shown with the region grid
sets: dict = {}  # further datasets, name -> Scrapbook parameter overrides (e.g. 05's training scenes)

# %%
import pandas as pd
from IPython.display import Image, display

from lib import artifacts as A
from lib.config import notebook_params
from lib.paths import stage_dir
from lib.scrapbook import ScrapbookConfig, explore
from lib.scrapbook import run as run_stage

cfg = ScrapbookConfig.from_params(notebook_params(ScrapbookConfig, globals()), source="notebook 04_scrapbook")
out = stage_dir(run, A.SCRAPBOOK)
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
assert by_type.get("presence") == by_type.get("counting"), "presence and counting should come in equal numbers"
assert stats["images"] > 0 and stats["questions"] > 0
print(f"datasets -> {out / A.DATASETS}")
