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
# # 00 · Setup
# > Build the embedded models once, write the sample images, and probe every model of the profile
# > through the call cache, so a broken environment fails here in seconds.
#
# **Inputs:** model specs (params) · **Outputs:** `outputs/<run>/00_setup/` (probe.csv, images/, datasets/ of the demo,
# summary.json, provenance.json)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # global seed recorded in provenance; each generator takes its own
vlm: dict = {"backend": "tiny", "name": "llava"}  # the VLM later stages answer with
text_llm: dict = {"backend": "tiny", "name": "smollm2"}  # generator / judge LLM
extra_models: dict = {}  # more specs to probe, label -> spec (e.g. an OpenAI-compatible endpoint)
demo_datasets: bool = True  # write the embedded demo's mcq / vqa / yesbut datasets (06 evaluates them)

# %%
from IPython.display import display

from lib import artifacts as A
from lib import setup
from lib.config import notebook_params
from lib.paths import stage_dir

cfg = setup.SetupConfig.from_params(notebook_params(setup.SetupConfig, globals()), source="notebook 00_setup")
out = stage_dir(run, A.SETUP)

# %% [markdown]
# ## Sample images, probes, demo datasets
# Real photographs from scikit-image, used for probing here and as demo material later. Choices are
# answered by constrained decoding (token trie) or option log-likelihood, so even an untrained tiny
# model gives a valid answer there; its free text is noise until stage 05 trains it.

# %%
summary = setup.run(cfg, out)
display(A.read_table(out.parent, A.SETUP, A.PROBE))

# %% [markdown]
# ## Check

# %%
assert summary["constrained_invalid"] == 0, "a constrained answer was invalid: see the probe table"
print(f"{summary['probe_answers']} probe answers from {summary['models']} models; demo datasets: "
      f"{', '.join(summary['datasets']) or 'none'} -> {out}")
