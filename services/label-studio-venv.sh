#!/usr/bin/env bash
# A pinned Label Studio (and its SDK) in its own venv outside the clone, built once per machine.
#   services/label-studio-venv.sh    -> prints the venv's python
set -euo pipefail
LS_VERSION=1.23.2
CACHE=${VQALAB_SERVICES_CACHE:-$HOME/.cache/vqalab/services}
VENV=$CACHE/label-studio-$LS_VERSION
STAMP=$VENV/.installed
if [ -f "$STAMP" ]; then echo "$VENV/bin/python"; exit 0; fi
mkdir -p "$CACHE"
exec 3>&1 1>&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "label-studio==$LS_VERSION"
"$VENV/bin/python" -c "import label_studio, label_studio_sdk" # importable (--version would ask PyPI)
touch "$STAMP"
echo "$VENV/bin/python" >&3
