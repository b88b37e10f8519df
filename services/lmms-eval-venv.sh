#!/usr/bin/env bash
# A pinned lmms-eval in its own venv outside the clone, built once per machine and reused.
#   services/lmms-eval-venv.sh       -> prints the venv's python
# lmms-eval's own requirements pull torchvision, wandb, audio and video stacks, and an unpinned
# torch (a CUDA build); its CLI and llava_hf need few of them. So: lmms-eval --no-deps, beside the
# packages it imports on the way to a local task and llava_hf (what a bare venv showed missing), the project's torch pin (the machine's pip config stays: it holds
# the local CPU wheel), transformers/accelerate/datasets in the project's ranges, and this clone
# installed --no-deps with its `lmms-eval` extra, so an exported utils.py imports VQA Lab's scoring.
set -euo pipefail
LMMS_EVAL_VERSION=0.7.3
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${VQALAB_SERVICES_CACHE:-$HOME/.cache/vqalab/services}
VENV=$CACHE/lmms-eval-$LMMS_EVAL_VERSION
PY=$VENV/bin/python
STAMP=$VENV/.installed
PIP=("$PY" -m pip install -q --disable-pip-version-check)
quiet() { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }  # the machine's empty index dirs
if [ -f "$STAMP" ]; then
  # one venv per machine, several clones: point its editable VQA Lab at this one (seconds)
  if [ "$("$PY" -c 'import lib, pathlib; print(pathlib.Path(lib.__file__).resolve().parents[1])' 2>/dev/null)" != "$ROOT" ]; then
    "${PIP[@]}" --no-deps -e "$ROOT" 2>&1 | quiet
  fi
  echo "$PY"
  exit 0
fi
mkdir -p "$CACHE"
exec 3>&1 1>&2  # progress on stderr, the answer on stdout
rm -rf "$VENV"
python3 -m venv "$VENV"
"${PIP[@]}" --upgrade pip 2>&1 | quiet
# the project's pins and its lmms-eval extra, read from its pyproject.toml (one source)
"$PY" - "$ROOT/pyproject.toml" > "$VENV/requirements.txt" <<'PY'
import sys, tomllib
from pathlib import Path
project = tomllib.loads(Path(sys.argv[1]).read_text())["project"]
wanted = ("torch", "transformers", "accelerate", "datasets")
for req in project["dependencies"]:
    name = req.split(";")[0].replace(" ", "")
    if name.split("=")[0].split(">")[0].split("<")[0] in wanted:
        print(name)
print("\n".join(project["optional-dependencies"]["lmms-eval"]))
PY
cat >> "$VENV/requirements.txt" <<'REQ'
# lmms-eval 0.7.3's imports on the way to a local task and llava_hf, and its results table
loguru
evaluate
pytz
tenacity
pytablewriter
decord
filelock<4
REQ
"${PIP[@]}" -r "$VENV/requirements.txt" 2>&1 | quiet
"${PIP[@]}" --no-deps "lmms-eval==$LMMS_EVAL_VERSION" 2>&1 | quiet
"${PIP[@]}" --no-deps -e "$ROOT" 2>&1 | quiet
"$PY" - <<'PY'
import lmms_eval.__main__, lmms_eval.evaluator, lmms_eval.models as models  # noqa: F401
from importlib.metadata import version
import lib.export.harnesses  # noqa: F401  (what an exported utils.py imports)
models.get_model("llava_hf")
print("lmms-eval", version("lmms-eval"), "torch", version("torch"), "transformers", version("transformers"))
PY
touch "$STAMP"
echo "$PY" >&3
