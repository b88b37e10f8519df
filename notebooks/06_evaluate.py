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
# # 06 · Evaluate
# > Ask every model every task's questions (zero-shot and zero-shot chain of thought), read the
# > answers without guessing, judge open answers with LAVE, and score them with the seeds' metrics
# > and the Scrapbook protocol. Every call goes through the cache: a rerun or a resumed run repeats
# > nothing, and `python -m lib.evaluate rescore --run RUN` recomputes the tables without a model.
#
# **Inputs:** dataset folders (the demo's, 04's Scrapbook set, 03's MCQ set, any folder) and model specs
# · **Outputs:** `outputs/<run>/06_evaluate/` (predictions.jsonl, judgements.jsonl, metrics.csv, levels.csv, errors.csv)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # item sampling and bootstrap resampling
datasets: dict = {}  # name: dataset folder; a value "stage:NN_name/sub" resolves inside this run's outputs
demo_data: bool = True  # also evaluate the embedded demo datasets (mcq, yesbut, vqa)
scrapbook: dict = {}  # Scrapbook parameters: generate a fresh probing set here (empty: none), e.g. 05's scenes
yesbut_manifest: str = ""  # a collected YesBut manifest (e.g. stage:01_collect/manifest.jsonl): detection, understanding, completion
models: dict = {"base": {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}}  # label: model spec
styles: list = ["zero_shot", "cot"]  # zero_shot and/or cot
constrain: bool = True  # constrained decoding over closed answer sets (choices) where the backend allows it
max_new_tokens: int = 16
cot_max_new_tokens: int = 32  # reasoning length for cot
judge: dict = {"backend": "tiny", "name": "smollm2"}  # the LAVE judge ({} for none)
judge_max_new_tokens: int = 64
text_metrics: list = ["bleu", "rouge_l", "meteor", "bertscore", "cider"]  # yesbut.understanding
max_items: int = 200  # per dataset (0: all); Scrapbook keeps whole image chains
n_resamples: int = 1000  # bootstrap resamples for the confidence intervals

# %%
import pandas as pd
from IPython.display import display

from lib.evaluate import EvalConfig, evaluate, invalid_summary, resolve_folder, resolve_spec
from lib.paths import stage_dir
from lib.provenance import write_provenance
from lib.scrapbook import ScrapbookParams
from lib.scrapbook import generate as generate_scrapbook
from lib.io import read_jsonl
from lib.collect import yesbut_datasets
from lib.setup import demo_datasets

out = stage_dir(run, "06_evaluate")


data = {name: resolve_folder(run, folder) for name, folder in datasets.items()}
if demo_data:
    data.update({name: str(folder) for name, folder in demo_datasets(out / "data", seed=seed).items()})
if yesbut_manifest:
    records = list(read_jsonl(resolve_folder(run, yesbut_manifest)))
    data["yesbut-collected"] = str(yesbut_datasets(records, out / "data" / "yesbut-collected", seed=seed))
if scrapbook:
    stats = generate_scrapbook(ScrapbookParams.from_dict({"seed": seed, **scrapbook}), out / "data" / "scrapbook-fresh",
                               progress=False)
    data["scrapbook-fresh"] = str(out / "data" / "scrapbook-fresh")
    print(f"fresh Scrapbook set: {stats['images']} images, {stats['questions']:,} questions")
cfg = EvalConfig(datasets=data, models={k: resolve_spec(run, v) for k, v in models.items()}, styles=styles,
                 constrain=constrain, max_new_tokens=max_new_tokens, cot_max_new_tokens=cot_max_new_tokens,
                 judge=judge or None, judge_max_new_tokens=judge_max_new_tokens, text_metrics=text_metrics,
                 max_items=max_items, n_resamples=n_resamples, seed=seed)
pd.Series(cfg.datasets, name="dataset folder").to_frame()

# %% [markdown]
# ## Run (cached, resumable)

# %%
summary = evaluate(cfg, out)
summary

# %% [markdown]
# ## Invalid answers
# Answers that could not be read are kept raw and count as wrong in every score below.

# %%
invalid = invalid_summary(out)
display(invalid.style.format({"invalid_rate": "{:.1%}"}))

# %% [markdown]
# ## Headline metrics (95% bootstrap intervals; `n_invalid` beside every score)

# %%
metrics = pd.read_csv(out / "metrics.csv")
headline = metrics[metrics["subset"].isin(["all", "non-absurd"]) & (metrics["metric"] != "invalid_rate")]
display(headline.pivot_table(index=["dataset", "task", "metric"], columns=["model", "style"], values="value").round(3))

# %% [markdown]
# ## Open answers: LAVE beside exact match, ANLS and VQA accuracy (same answers)

# %%
vqa = metrics[(metrics["task"] == "vqa.open") & (metrics["subset"] == "all")]
display(vqa.pivot_table(index="metric", columns=["model", "style"], values="value").round(3))
judgements = pd.read_json(out / "judgements.jsonl", lines=True)
if len(judgements):
    display(judgements[["model", "item_id", "rating", "score", "valid", "rationale"]].head(8))

# %% [markdown]
# ## Scrapbook: Table 8 (overall), the error categories (Tables 9, 10, 15) and level 1 by concept

# %%
errors = pd.read_csv(out / "errors.csv")
if len(errors):
    display(errors[errors["unit"] == "questions"][["dataset", "model", "style", "filter", "count", "correct", "accuracy"]])
    display(errors[errors["unit"] == "aggregated"].pivot_table(index=["dataset", "category"],
                                                                columns=["model", "style", "filter"], values="count"))
    levels = pd.read_csv(out / "levels.csv")
    display(levels[(levels["level"] == 1) & (levels["form"] == "all")].head(12))

# %%
write_provenance(out, "06_evaluate", {"run": run, "datasets": cfg.datasets, "models": cfg.models, "styles": styles,
                                      "judge": judge, "max_items": max_items}, seed)
assert (out / "metrics.csv").exists() and summary["predictions"] > 0
