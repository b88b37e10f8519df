#!/usr/bin/env bash
# A pinned Label Studio (and its SDK) in its own venv outside the clone, built once per machine.
#   services/label-studio-venv.sh    -> prints the venv's python
# Label Studio 1.23.2 asks for sentry-sdk>=2.16 with no ceiling, and calls sentry_sdk.init with
# send_default_pii, which sentry-sdk 3 no longer accepts (the server exits at start), hence <3.
# The venv is named by this script's digest, so a change here builds a new one.
set -euo pipefail
LS_VERSION=1.23.2
CACHE=${VQALAB_SERVICES_CACHE:-$HOME/.cache/vqalab/services}
KEY=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-8)
VENV=$CACHE/label-studio-$LS_VERSION-$KEY
STAMP=$VENV/.installed
if [ -f "$STAMP" ]; then echo "$VENV/bin/python"; exit 0; fi
mkdir -p "$CACHE"
exec 3>&1 1>&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "label-studio==$LS_VERSION" "sentry-sdk<3"
"$VENV/bin/python" -c "import label_studio, label_studio_sdk" # importable (--version would ask PyPI)
touch "$STAMP"
echo "$VENV/bin/python" >&3
