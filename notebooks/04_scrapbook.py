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
# **Inputs:** params (shapes, or COCO / cut-out folders, background folders) · **Outputs:** `outputs/<run>/04_scrapbook/` (dataset folder, counts, concept tables, figures)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # one seed for the whole dataset; every unit derives its own RNG from it
objects: str = "shapes"  # shapes | cutouts | coco
object_selection: str = "deterministic"  # deterministic sliding window | random
class_selection: str = "unique"  # same | unique | random
color_selection: str = "unique"
size_selection: str = "unique"
n_sets: int = 1  # S: object sets
objects_per_set: int = 3  # N
n_backgrounds: int = 1  # B per set
n_arrangements: int = 1  # A: (main, reference) pairs per background
objects_per_image: int = 3  # x: objects added one by one (one image per step)
n_region_pairs: int = 2  # P: pairs of absolute regions per arrangement
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

# %%
from IPython.display import display

from lib import plots
from lib.paths import stage_dir
from lib.provenance import write_provenance
from lib.scrapbook import ScrapbookParams, generate
from lib.scrapbook import explore

out = stage_dir(run, "04_scrapbook")
params = ScrapbookParams(
    objects=objects, object_selection=object_selection, class_selection=class_selection,
    color_selection=color_selection, size_selection=size_selection, n_sets=n_sets, objects_per_set=objects_per_set,
    n_backgrounds=n_backgrounds, n_arrangements=n_arrangements, objects_per_image=objects_per_image,
    n_region_pairs=n_region_pairs, n_questions_per_type=n_questions_per_type, backgrounds=backgrounds,
    cutouts_dir=cutouts_dir, coco_images=coco_images, coco_annotations=coco_annotations, canvas=canvas,
    size_start=size_start, size_step=size_step, types=types, groups=groups, forms=forms, seed=seed,
)

# %% [markdown]
# ## Generate
# Parameters are validated first; images, masks, scenes and questions are then streamed to disk.

# %%
stats = generate(params, out / "dataset")
print(f"{stats['images']} images, {stats['questions']:,} questions; placement failures: {stats['placement_failures'] or 'none'}")

# %% [markdown]
# ## Sample images
# The dashed lines are the nine absolute regions; each unit adds the main object, then the
# reference object at one relative position to it, then the others.

# %%
scenes = explore.read_scenes(out / "dataset")
fig, _ = plots.image_grid(*explore.preview(out / "dataset", scenes, n_preview))
plots.save(fig, out / "figures", "samples")

# %% [markdown]
# ## Sample questions of each type, group and form

# %%
display(explore.sample_questions(out / "dataset"))

# %% [markdown]
# ## Counts
# Presence and counting questions come in equal numbers, as in the paper's section 5.2.

# %%
import pandas as pd

counts = pd.read_csv(out / "dataset" / "counts.csv")
display(counts.pivot_table(index=["type", "group"], columns="subgroup", values="questions", aggfunc="sum", fill_value=0))
fig, _ = plots.question_counts(counts)
plots.save(fig, out / "figures", "question_counts")

# %% [markdown]
# ## Concepts enabled at levels 1 and 2
# A concept is enabled at a level when its presence questions have both yes and no answers and
# its counting questions both zero and non-zero answers (paper 5.1; Tables 3-6).

# %%
concepts = pd.read_csv(out / "dataset" / "concepts.csv")
display(concepts.pivot_table(index=["level", "concept", "value", "enabled"], columns="subgroup",
                             values="questions", aggfunc="sum", fill_value=0))

# %% [markdown]
# ## Save

# %%
write_provenance(out, "04_scrapbook", {"run": run, **stats["params"]}, seed)
by_type = stats["by_type"]
assert by_type.get("presence") == by_type.get("counting"), "presence and counting should come in equal numbers"
assert stats["images"] > 0 and stats["questions"] > 0
print(f"dataset -> {out / 'dataset'}")
