"""The papermill pipeline: params checked before anything runs, layering, failures, secrets."""

import json
import subprocess
import sys

import jupytext
import pytest

from lib import pipeline
from lib.paths import PARAMS

from .support.openai_server import OpenAIStub

STAGE_A = '''# %% tags=["parameters"]
run: str = "smoke"
seed: int = 0
size: int = 3  # how many
label: str = "default"
ratio: float = 0.5
tags: list = []

# %%
from lib.paths import stage_dir
from lib.provenance import write_provenance
out = stage_dir(run, "01_alpha")
(out / "values.json").write_text(__import__("json").dumps({"size": size, "label": label, "ratio": ratio}))
write_provenance(out, "01_alpha", {"size": size, "label": label}, seed)
'''

STAGE_FAIL = '''# %% tags=["parameters"]
run: str = "smoke"
seed: int = 0

# %%
raise RuntimeError("stage two is broken")
'''

STAGE_API = '''# %% tags=["parameters"]
run: str = "smoke"
seed: int = 0
base_url: str = ""

# %%
from lib.models import Request, generate, load_model
from lib.store import CallStore
model = load_model({"backend": "openai", "name": "stub", "base_url": base_url, "api_key_env": "VQALAB_PIPELINE_KEY"})
print(model.spec)
out = generate(model, [Request.simple("hello")], store=CallStore.default())
print(out[0].text)
'''


def _project(tmp_path, stages: dict[str, str], params: dict[str, str]):
    nb_dir, params_dir = tmp_path / "notebooks", tmp_path / "params"
    nb_dir.mkdir()
    params_dir.mkdir()
    for name, text in stages.items():
        nb = jupytext.reads(text, fmt="py:percent")
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        jupytext.write(nb, nb_dir / f"{name}.ipynb")
    for name, text in params.items():
        (params_dir / name).write_text(text)
    return nb_dir, params_dir


@pytest.fixture
def outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    return tmp_path / "outputs"


def test_unknown_key_is_an_error_naming_file_and_key(tmp_path):
    nb, params = _project(tmp_path, {"01_alpha": STAGE_A}, {"01_alpha.demo.yaml": "size: 4\nsizes: 5\n"})
    with pytest.raises(pipeline.ParamsError, match=r"01_alpha\.demo\.yaml: unknown parameter 'sizes'"):
        pipeline.plan("demo", notebooks_dir=nb, params_dir=params)


@pytest.mark.parametrize("line, key, expected", [
    ("size: '4'", "size", "int"), ("size: true", "size", "int"), ("label: 3", "label", "str"),
    ("ratio: fast", "ratio", "float"), ("tags: a", "tags", "list"),
])
def test_wrong_type_is_an_error_naming_file_key_and_type(tmp_path, line, key, expected):
    nb, params = _project(tmp_path, {"01_alpha": STAGE_A}, {"common.demo.yaml": f"run: r\n{line}\n"})
    with pytest.raises(pipeline.ParamsError, match=rf"common\.demo\.yaml: parameter '{key}' .* must be {expected}"):
        pipeline.plan("demo", notebooks_dir=nb, params_dir=params)


def test_int_is_accepted_for_float(tmp_path):
    nb, params = _project(tmp_path, {"01_alpha": STAGE_A}, {"common.demo.yaml": "ratio: 1\n"})
    assert pipeline.plan("demo", notebooks_dir=nb, params_dir=params)[0].params == {"ratio": 1}


def test_layers_run_and_provenance(tmp_path, outputs):
    nb, params = _project(tmp_path, {"01_alpha": STAGE_A}, {
        "common.demo.yaml": "run: layered\nseed: 7\nlabel: from-common\nsize: 1\n",
        "01_alpha.demo.yaml": "size: 9\n",
    })
    folder = pipeline.run("demo", notebooks_dir=nb, params_dir=params, progress=False)
    assert folder == outputs / "layered"
    values = json.loads((folder / "01_alpha" / "values.json").read_text())
    assert values == {"size": 9, "label": "from-common", "ratio": 0.5}  # stage file > common > notebook default
    assert (folder / "executed" / "01_alpha.ipynb").exists()
    prov = json.loads((folder / "01_alpha" / "provenance.json").read_text())
    assert prov["seed"] == 7 and prov["params"]["size"] == 9
    assert {"python", "torch", "transformers", "vqalab"} <= set(prov["versions"]) and "sha" in prov["git"]


def test_failing_stage_stops_the_run_and_names_the_executed_notebook(tmp_path, outputs):
    nb, params = _project(tmp_path, {"01_alpha": STAGE_A, "02_broken": STAGE_FAIL, "03_after": STAGE_A},
                          {"common.demo.yaml": "run: failing\n"})
    with pytest.raises(pipeline.StageFailed) as e:
        pipeline.run("demo", notebooks_dir=nb, params_dir=params, progress=False)
    executed = outputs / "failing" / "executed" / "02_broken.ipynb"
    assert str(executed) in str(e.value) and executed.exists()
    assert "stage two is broken" in executed.read_text()
    assert not (outputs / "failing" / "executed" / "03_after.ipynb").exists()


def test_all_stages_are_checked_before_any_runs(tmp_path, outputs):
    nb, params = _project(tmp_path, {"01_alpha": STAGE_A, "02_beta": STAGE_A},
                          {"common.demo.yaml": "run: checked\n", "02_beta.demo.yaml": "nope: 1\n"})
    with pytest.raises(pipeline.ParamsError, match="02_beta.demo.yaml"):
        pipeline.run("demo", notebooks_dir=nb, params_dir=params, progress=False)
    assert not (outputs / "checked").exists()


def test_api_key_never_reaches_outputs(tmp_path, outputs, monkeypatch):
    key = "sk-live-DO-NOT-LEAK-4242"
    monkeypatch.setenv("VQALAB_PIPELINE_KEY", key)
    with OpenAIStub() as server:
        nb, params = _project(tmp_path, {"01_api": STAGE_API},
                              {"common.demo.yaml": f"run: secret\nbase_url: '{server.url}'\n"})
        pipeline.run("demo", notebooks_dir=nb, params_dir=params, progress=False)
        assert server.auth_headers == {f"Bearer {key}"}  # the key was really used
    files = [p for p in outputs.rglob("*") if p.is_file()]
    assert any(p.name == "01_api.ipynb" for p in files) and any(p.name.startswith("calls.sqlite") for p in files)
    leaked = [p for p in files if key.encode() in p.read_bytes()]
    assert leaked == []


def test_cli_reports_bad_params_with_exit_code():
    result = subprocess.run([sys.executable, "-m", "lib.pipeline", "--profile", "nosuch", "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "unknown profile 'nosuch'" in result.stderr


@pytest.mark.parametrize("profile", sorted({p.name.split(".")[-2] for p in PARAMS.glob("*.yaml")}))
def test_shipped_params_match_the_notebooks(profile):
    plans = pipeline.plan(profile)
    assert plans, f"profile {profile} selects no notebook"
    assert all(p.params.get("run") for p in plans)
