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
# (items.jsonl + dataset.json - a dataset folder 06 can evaluate -, iterations.csv, memeqa.json, state.json, figures)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # option shuffles and generation seeds
skeletons_from: str = "annotations"  # "annotations" (stage 02) or a MemeQA JSON path
memeqa_images: str = ""  # the images folder of a MemeQA JSON
max_skeletons: int = 0  # 0: all
generator: dict = {"backend": "tiny", "name": "smollm2"}  # any text LLM (hf / openai / tiny)
discriminators: list = [{"backend": "tiny", "name": "llava"}]  # one or more VLM specs
combine: str = "vote"  # several discriminators: vote, or all must be fooled
blind_model: dict = {"backend": "tiny", "name": "smollm2"}  # text-only pass flagging questions answerable without the image ({}: none)
n_options: int = 4
none_of_the_above: bool = True
nota_position: str = "random"  # "last" reproduces the released data's shortcut (always D)
max_iterations: int = 3  # the seed used 20
patience: int = 0  # stop when accuracy changed by < stable_tol for this many iterations (0: off)
stable_tol: float = 0.01
max_retries: int = 1
paraphrase_threshold: float = 0.9
min_length_ratio: float = 0.4  # generated distractors need this share of the correct options' words (length giveaway)
max_new_tokens: int = 64

# %%
import pandas as pd
from IPython.display import display

from lib import af, plots
from lib.annotate import AnnotationStore
from lib.io import dataset_info, export_memeqa, read_jsonl, save_dataset
from lib.models import load_model
from lib.paths import stage_dir
from lib.provenance import write_provenance
from lib.store import CallStore

out = stage_dir(run, "03_adversarial_filter")

# %% [markdown]
# ## Skeletons

# %%
if skeletons_from == "annotations":
    manifest = {r["id"]: r["path"] for r in read_jsonl(stage_dir(run, "01_collect", create=False) / "manifest.jsonl")}
    table = AnnotationStore(stage_dir(run, "02_annotate", create=False) / "annotations.jsonl").table()
    skeletons, skipped = af.from_annotations(table, manifest), []
else:
    skeletons, skipped = af.from_memeqa(skeletons_from, memeqa_images)
if max_skeletons:
    skeletons = skeletons[:max_skeletons]
print(f"{len(skeletons)} skeletons, {len(skipped)} skipped (no correct option to keep)")
pd.Series([s.type for s in skeletons]).value_counts().rename("skeletons").to_frame()

# %% [markdown]
# ## Filter (resumable: state.json after every iteration)

# %%
cfg = af.AFConfig(n_options=n_options, none_of_the_above=none_of_the_above, nota_position=nota_position,
                  max_iterations=max_iterations, stable_tol=stable_tol, patience=patience, max_retries=max_retries,
                  paraphrase_threshold=paraphrase_threshold, min_length_ratio=min_length_ratio, combine=combine,
                  max_new_tokens=max_new_tokens, seed=seed)
store = CallStore.default()
state = af.run(skeletons, load_model(generator), [load_model(d) for d in discriminators], cfg, out, store=store)
iterations = pd.DataFrame(state["iterations"])
iterations.to_csv(out / "iterations.csv", index=False)
display(iterations)
if len(iterations):
    fig, _ = plots.af_curves(iterations)
    plots.save(fig, out / "figures", "iterations")

# %% [markdown]
# ## Questions, the blind check and the exports

# %%
items = af.final_items(state)
if blind_model and items:
    for item, answerable in zip(items, af.blind_check(load_model(blind_model), items, store)):
        item.meta["blind_answerable"] = answerable
save_dataset(out, items, dataset_info("adversarial-filter", provenance={"skeletons": skeletons_from}))  # items.jsonl
export_memeqa(items, out / "memeqa.json")
summary = pd.DataFrame([{"type": i.meta["type"], "fooled": i.meta["fooled"],
                         "blind_answerable": i.meta.get("blind_answerable")} for i in items])
display(summary.groupby("type").agg(questions=("fooled", "size"), fooled=("fooled", "sum"),
                                     blind_answerable=("blind_answerable", "sum")))

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
write_provenance(out, "03_adversarial_filter", {"run": run, **cfg.__dict__, "generator": generator,
                                                "discriminators": discriminators, "skeletons_from": skeletons_from}, seed)
assert (out / "items.jsonl").exists()
