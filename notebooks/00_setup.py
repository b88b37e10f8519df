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
# **Inputs:** model specs (params) · **Outputs:** `outputs/<run>/00_setup/` (probe table, sample images, provenance)

# %% tags=["parameters"]
run: str = "smoke"  # outputs go to outputs/<run>/
seed: int = 0  # global seed recorded in provenance; each generator takes its own
vlm: dict = {"backend": "tiny", "name": "llava"}  # the VLM later stages answer with
text_llm: dict = {"backend": "tiny", "name": "smollm2"}  # generator / judge LLM
extra_models: dict = {}  # more specs to probe, label -> spec (e.g. an OpenAI-compatible endpoint)

# %%
from IPython.display import display

from lib import setup
from lib.io import write_sample_images
from lib.paths import stage_dir
from lib.provenance import write_provenance
from lib.store import CallStore

out = stage_dir(run, "00_setup")
store = CallStore.default()
specs = {"vlm": vlm, "text_llm": text_llm, **extra_models}

# %% [markdown]
# ## Sample images
# Real photographs from scikit-image, used for probing here and as demo material later.

# %%
images = write_sample_images(out / "images")
[p.name for p in images]

# %% [markdown]
# ## Probe every model
# Choices are answered by constrained decoding (token trie) or option log-likelihood, so even an
# untrained tiny model gives a valid answer there; its free text is noise until stage 05 trains it.

# %%
probe = setup.probe_models(specs, images, store)
display(probe)

# %% [markdown]
# ## Save

# %%
probe.to_csv(out / "probe.csv", index=False)
write_provenance(out, "00_setup", {"run": run, "seed": seed, "vlm": vlm, "text_llm": text_llm,
                                   "extra_models": extra_models}, seed)
constrained = probe[probe.method.str.startswith("constrained")]
assert constrained.valid.all(), "a constrained answer was invalid: see the probe table"
print(f"{len(probe)} probe answers from {probe.model.nunique()} models -> {out}")
