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
# # 06 · Evaluate
# > Ask every model every task's questions (zero-shot and zero-shot chain of thought), read the
# > answers without guessing, judge open answers with LAVE, and score them with the seeds' metrics
# > and the Scrapbook protocol. Every call goes through the cache: a rerun or a resumed run repeats
# > nothing, and `python -m lib.stages.evaluate rescore --run RUN` recomputes the tables without a model.
#
# **Inputs:** dataset folders (00's demo sets, 04's Scrapbook sets, 03's MCQ set, 01's YesBut set, any folder) and
# model specs · **Outputs:** `outputs/<run>/06_evaluate/` (predictions.jsonl, judgements.jsonl, metrics.csv, levels.csv,
# errors.csv, config.json, summary.json, provenance.json)

# %% [markdown]
# Opened as it is, this notebook runs the `demo` profile into `outputs/demo/` (after `make run`, it
# reads that run's earlier stages). Another profile: set `profile` below, or run
# `make stage STAGE=06_evaluate PROFILE=<profile>`; the stage's values come from `params/`, never from here.

# %% tags=["parameters"]
profile: str = ""  # params/common.<profile>.yaml; empty: $VQALAB_PROFILE if set, else "demo"
run: str = ""  # outputs go to outputs/<run>/; empty: the profile's run
overrides: dict = {}  # config fields set on top of the profile, e.g. {"max_items": 50}

# %%
import pandas as pd
from IPython.display import display

from lib.config import resolve
from lib.families.vqa.task import OpenVQA
from lib.io import artifacts
from lib.pages import browser
from lib.stages import evaluate

resolved = resolve(evaluate.EvalConfig, profile, run or None, overrides)  # as make run resolves it
cfg, out, run = resolved.cfg, resolved.out, resolved.run
display(resolved.table())  # every field, and the params file that set it
pd.Series(evaluate.resolved(cfg, out.parent).datasets, name="dataset folder").to_frame()

# %% [markdown]
# ## Ask every model (cached, resumable)
# The items of each dataset (sampled to `max_items`), then every model in every style; open answers are judged
# (LAVE) when the profile names a judge.

# %%
cfg, data = evaluate.items_to_ask(
    cfg, out
)  # the config with this run's paths, which the later steps take
counts = evaluate.ask(cfg, out, data)
counts

# %% [markdown]
# ## Score
# Every table is computed from the stored answers, as `python -m lib.stages.evaluate rescore` does without a model.

# %%
scores = evaluate.rescore_folder(out)
scores

# %% [markdown]
# ## Invalid answers
# Answers that could not be read are kept raw and count as wrong in every score below.

# %%
invalid = evaluate.invalid_summary(out)
display(invalid.style.format({"invalid_rate": "{:.1%}"}))

# %% [markdown]
# ## Headline metrics (95% bootstrap intervals; `n_invalid` and `n_truncated` beside every score)

# %%
metrics = artifacts.read_table(out.parent, artifacts.EVALUATE, artifacts.METRICS)
headline = metrics[
    metrics["subset"].isin(["all", "non-absurd"]) & (metrics["metric"] != "invalid_rate")
]
display(
    headline.pivot_table(
        index=["dataset", "task", "metric"], columns=["model", "style"], values="value"
    ).round(3)
)

# %% [markdown]
# ## Open answers: the judge (LAVE on the demo) beside exact match, ANLS and VQA accuracy

# %%
vqa = OpenVQA.rows(metrics)
vqa = vqa[vqa["subset"] == "all"]
display(vqa.pivot_table(index="metric", columns=["model", "style"], values="value").round(3))
judgements = pd.DataFrame(
    artifacts.read_records(out.parent, artifacts.EVALUATE, artifacts.JUDGEMENTS)
)
if len(judgements):
    display(judgements[["model", "item_id", "rating", "score", "valid", "rationale"]].head(8))

# %% [markdown]
# ## Scrapbook: Table 8 (overall), the error categories (Tables 9, 10, 15) and level 1 by concept

# %%
errors = artifacts.read_table(out.parent, artifacts.EVALUATE, "errors.csv")
if len(errors):
    display(
        errors[errors["unit"] == "questions"][
            ["dataset", "model", "style", "filter", "count", "correct", "accuracy"]
        ].convert_dtypes()  # counts as integers, not floats
    )
    display(
        errors[errors["unit"] == "aggregated"].pivot_table(
            index=["dataset", "category"],
            columns=["model", "style", "filter"],
            values="count",
            aggfunc="sum",
            fill_value=0,
        )
    )
    levels = artifacts.read_table(out.parent, artifacts.EVALUATE, "levels.csv")
    display(levels[(levels["level"] == 1) & (levels["form"] == "all")].head(12).convert_dtypes())

# %% [markdown]
# ## The answers behind a number
# Any slice of the predictions with its images, question, reference, raw and read answer and outcome
# (filters: dataset, task, model, style, subset, outcome); stage 07 writes the same rows as a page,
# `outputs/<run>/browser/index.html`, linked from the report's headline numbers.

# %%
answers = browser.frame(out.parent, style="zero_shot", outcome="wrong")
browser.show(answers, max_rows=8)

# %% [markdown]
# ## Summary and provenance

# %%
summary = evaluate.finish(cfg, out, counts, scores)
assert (out / artifacts.METRICS).exists() and summary["predictions"] > 0
summary
