"""The README's "Your dataset" quick start, command for command: check the example folder, import
its CSV, evaluate the imported folder with a profile's model (the smoke profile's tiny VLM here; a
user names their own profile)."""

import json
import subprocess
import sys

import pandas as pd

from lib.paths import ROOT


def _run(*args, **kw):
    r = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r


def test_your_dataset_quick_start(tmp_path):
    assert "ok" in _run("lib.io", "check", "examples/my_dataset").stdout
    mine = tmp_path / "mine"
    _run("lib.io", "import-csv", "examples/my_dataset/data.csv", "--out", str(mine))
    out = tmp_path / "06_evaluate"
    r = _run("lib.evaluate", "--profile", "smoke", "--set", f"datasets={{mine: {mine}}}", "--set", "demo_data=false",
             "--set", "models={base: vlm}", "--set", "styles=[zero_shot]", "--out", str(out))
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary
    metrics = pd.read_csv(out / "metrics.csv")
    assert set(metrics.model) == {"base"} and set(metrics.dataset) == {"mine"}
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["profile"] == "smoke" and prov["params_from"]["models"] == "overrides"
    assert prov["params"]["models"]["base"] == {"backend": "tiny", "name": "llava"}  # the profile's vlm, by name
