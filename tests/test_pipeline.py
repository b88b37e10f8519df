"""The papermill pipeline: a profile's plan checked before anything runs, layering, skipped stages,
failures, the preflight, secrets."""

import json
import os
import subprocess
import sys

import jupytext
import pytest

from lib.config import profiles
from lib.pipeline import execute as pipeline

from .support.openai_server import OpenAIStub

PARAMETERS = """# %% tags=["parameters"]
profile: str = ""
run: str = ""
overrides: dict = {}

"""
# A stage notebook as the real ones are: it resolves its config class and writes what it read.
STAGE_COLLECT = (
    PARAMETERS
    + """# %%
import json
from lib.config import finish, resolve
from lib.stages.collect import CollectConfig
r = resolve(CollectConfig, profile, run or None, overrides)
(r.out / "values.json").write_text(json.dumps(r.cfg.to_dict()))
# %% [markdown]
# ## Finish
# %%
finish(r.out, r.stage, r.cfg, {"ok": True})
"""
)

STAGE_FAIL = (
    PARAMETERS
    + """# %%
raise RuntimeError("stage two is broken")
"""
)

STAGE_API = (
    PARAMETERS
    + """# %%
from lib.config import resolve
from lib.models import Request, generate, load_model
from lib.stages.evaluate import EvalConfig
from lib.models.store import CallStore
r = resolve(EvalConfig, profile, run or None, overrides)
model = load_model(r.cfg.models["api"])
print(model.spec)
out = generate(model, [Request.simple("hello")], store=CallStore.default())
print(out[0].text)
"""
)

STAGES = "[01_collect, 02_annotate, 06_evaluate]"


def _project(tmp_path, stages: dict[str, str], params: dict[str, str]):
    nb_dir, params_dir = tmp_path / "notebooks", tmp_path / "params"
    nb_dir.mkdir()
    params_dir.mkdir()
    for name, text in stages.items():
        nb = jupytext.reads(text, fmt="py:percent")
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        jupytext.write(nb, nb_dir / f"{name}.ipynb")
    for name, text in params.items():
        (params_dir / name).write_text(text)
    return nb_dir, params_dir


@pytest.fixture
def outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    return tmp_path / "outputs"


def test_unknown_key_is_an_error_naming_file_key_and_a_suggestion(tmp_path):
    nb, params = _project(
        tmp_path,
        {"01_collect": STAGE_COLLECT},
        {
            "common.p.yaml": "run: r\nstages: [01_collect]\n",
            "01_collect.p.yaml": "near_duplicate_distanse: 3\n",
        },
    )
    with pytest.raises(
        pipeline.ParamsError,
        match=r"01_collect\.p\.yaml: unknown parameter\(s\) "
        r"\['near_duplicate_distanse'\].*did you mean 'near_duplicate_distance'",
    ):
        pipeline.plan("p", notebooks_dir=nb, params_dir=params)


@pytest.mark.parametrize(
    "line, key, expected",
    [
        ("near_duplicate_distance: '4'", "near_duplicate_distance", "int"),
        ("manifest_datasets: 3", "manifest_datasets", "bool"),
        ("seed: fast", "seed", "int"),
        ("sources: a", "sources", "list"),
    ],
)
def test_wrong_type_is_an_error_naming_file_key_and_type(tmp_path, line, key, expected):
    nb, params = _project(
        tmp_path,
        {"01_collect": STAGE_COLLECT},
        {"common.p.yaml": "run: r\nstages: [01_collect]\n", "01_collect.p.yaml": f"{line}\n"},
    )
    with pytest.raises(
        pipeline.ParamsError,
        match=rf"01_collect\.p\.yaml: parameter '{key}' must be (a )?{expected}",
    ):
        pipeline.plan("p", notebooks_dir=nb, params_dir=params)


@pytest.mark.parametrize(
    "common, message",
    [
        ("stages: [01_collect]\n", r"must say its 'run'"),
        ("run: r\n", r"must say its 'stages'"),
        ("run: r\nstages: [01_colect]\n", r"unknown stage '01_colect'.*did you mean '01_collect'"),
        (
            "run: r\nstages: [01_collect]\nmodels: {m: {backend: hff, name: x}}\n",
            r"models\.m\.backend must be one of",
        ),
        (
            "run: r\nstages: [01_collect]\nmodels: {m: {backend: tiny, name: llava}}\n",
            r"\['m'\] are used by no stage",
        ),
        (
            "run: r\nstages: [01_collect]\nsed: 1\n",
            r"'sed' is neither a profile key .* \(did you mean 'seed'\?\)",
        ),
        ("run: ../r\nstages: [01_collect]\n", r"run name '../r' is not a plain name"),
    ],
)
def test_a_bad_profile_is_named_with_what_to_do(tmp_path, common, message):
    nb, params = _project(tmp_path, {"01_collect": STAGE_COLLECT}, {"common.p.yaml": common})
    with pytest.raises(pipeline.ParamsError, match=message):
        pipeline.plan("p", notebooks_dir=nb, params_dir=params)


def test_a_stage_file_for_a_stage_the_profile_does_not_run_is_an_error(tmp_path):
    nb, params = _project(
        tmp_path,
        {"01_collect": STAGE_COLLECT},
        {"common.p.yaml": "run: r\nstages: [01_collect]\n", "05_train.p.yaml": "max_steps: 3\n"},
    )
    with pytest.raises(
        pipeline.ParamsError, match=r"05_train\.p\.yaml: sets stage 05_train but .* does not run it"
    ):
        pipeline.plan("p", notebooks_dir=nb, params_dir=params)


def test_a_model_name_binds_the_profile_spec_and_a_misspelt_one_is_named(tmp_path):
    nb, params = _project(
        tmp_path,
        {"06_evaluate": STAGE_API},
        {
            "common.p.yaml": "run: r\nstages: [06_evaluate]\nmodels: {vlm: {backend: tiny, name: llava}, llm: {backend: tiny, name: smollm2}}\n",
            "06_evaluate.p.yaml": "models: {a: vlm}\njudge: llm\n",
        },
    )
    cfg = pipeline.plan("p", notebooks_dir=nb, params_dir=params).steps[0].resolved.cfg
    assert cfg.models == {"a": {"backend": "tiny", "name": "llava"}} and cfg.judge == {
        "backend": "tiny",
        "name": "smollm2",
    }
    (params / "06_evaluate.p.yaml").write_text("models: {a: vml}\njudge: llm\n")
    with pytest.raises(
        pipeline.ParamsError, match=r"models\.a names model 'vml'.*did you mean 'vlm'"
    ):
        pipeline.plan("p", notebooks_dir=nb, params_dir=params)


def test_an_unset_model_field_takes_the_profile_model_of_its_role_never_the_tiny_default(tmp_path):
    nb, params = _project(
        tmp_path,
        {"06_evaluate": STAGE_API},
        {
            "common.p.yaml": "run: r\nstages: [06_evaluate]\nmodels: {vlm: {backend: hf, name: org/my-vlm}}\n"
        },
    )
    cfg = pipeline.plan("p", notebooks_dir=nb, params_dir=params).steps[0].resolved.cfg
    assert cfg.models == {"vlm": {"backend": "hf", "name": "org/my-vlm"}}
    (params / "common.p.yaml").write_text("run: r\nstages: [06_evaluate]\n")
    with pytest.raises(
        pipeline.ParamsError, match=r"models is not set and .* declares no model 'vlm'"
    ):
        pipeline.plan("p", notebooks_dir=nb, params_dir=params)


def test_layers_run_skipped_stages_and_provenance(tmp_path, outputs, capsys):
    nb, params = _project(
        tmp_path,
        {"01_collect": STAGE_COLLECT, "02_annotate": STAGE_FAIL},
        {
            "common.p.yaml": "run: layered\nstages: [01_collect]\nseed: 7\nnear_duplicate_distance: 1\n",
            "01_collect.p.yaml": "near_duplicate_distance: 9\n",
        },
    )
    folder = pipeline.run(
        "p",
        notebooks_dir=nb,
        params_dir=params,
        progress=False,
        overrides={"01_collect": {"manifest_datasets": False}},
    )
    assert folder == outputs / "layered"
    printed = capsys.readouterr().out
    assert (
        "02_annotate            skipped: not in the stages of common.p.yaml" in printed
    )  # the broken stage never ran
    values = json.loads((folder / "01_collect" / "values.json").read_text())
    assert (values["near_duplicate_distance"], values["seed"], values["manifest_datasets"]) == (
        9,
        7,
        False,
    )
    assert values["sources"] == [{"kind": "demo"}]  # the class default: nothing set it
    prov = json.loads((folder / "01_collect" / "provenance.json").read_text())
    assert prov["profile"] == "p" and prov["run"] == "layered" and prov["seed"] == 7
    assert prov["params_from"]["near_duplicate_distance"].endswith("01_collect.p.yaml")
    assert prov["params_from"]["manifest_datasets"] == "overrides"
    assert {"python", "torch", "transformers", "vqalab"} <= set(prov["versions"]) and "sha" in prov[
        "git"
    ]
    assert json.loads((folder / "timings.json").read_text())["seconds"].keys() == {"01_collect"}
    (folder / "timings.json").write_text(
        json.dumps({"profile": "p", "seconds": {"00_setup": 1.0, "01_collect": 9.0}})
    )
    pipeline.run(
        "p", notebooks_dir=nb, params_dir=params, progress=False
    )  # a rerun of one stage keeps the others
    seconds = json.loads((folder / "timings.json").read_text())["seconds"]
    assert (
        list(seconds) == ["00_setup", "01_collect"]
        and seconds["00_setup"] == 1.0
        and seconds["01_collect"] != 9.0
    )
    record = json.loads((folder / "timings.json").read_text())
    assert (
        record["total_s"] == round(sum(seconds.values()), 1)
        and record["machine"]["cores"] == os.cpu_count()
    )
    assert record["machine"]["cpu_model"] and len(record["loadavg"]["before"]) == 3
    table = pipeline.timings_table(record).splitlines()
    assert table[1].split() == ["00_setup", "1.0"] and table[-2].split() == [
        "total",
        f"{record['total_s']:.1f}",
    ]
    assert f"on {os.cpu_count()} cores of {record['machine']['cpu_model']}" in table[-1]
    # where 01's seconds went: the kernel, the setup cell and each step under its heading, adding up
    parts = record["parts"]["01_collect"]
    assert set(parts) == {"kernel", "setup", "Finish"} and set(record["parts"]) == {"01_collect"}
    assert abs(sum(parts.values()) - seconds["01_collect"]) <= 0.1 * len(parts)
    assert table[2].split()[:2] == ["01_collect", f"{seconds['01_collect']:.1f}"]
    assert table[2].endswith(f"{parts['Finish']:.1f} Finish")


def test_failing_stage_stops_the_run_and_names_the_executed_notebook(tmp_path, outputs):
    nb, params = _project(
        tmp_path,
        {"01_collect": STAGE_COLLECT, "02_annotate": STAGE_FAIL, "06_evaluate": STAGE_API},
        {
            "common.p.yaml": "run: failing\nstages: [01_collect, 02_annotate, 06_evaluate]\n"
            "models: {vlm: {backend: tiny, name: llava}}\n"
        },
    )
    with pytest.raises(pipeline.StageFailed) as e:
        pipeline.run("p", notebooks_dir=nb, params_dir=params, progress=False)
    executed = outputs / "failing" / "executed" / "02_annotate.ipynb"
    assert str(executed) in str(e.value) and executed.exists()
    assert "stage two is broken" in executed.read_text()
    assert not (outputs / "failing" / "executed" / "06_evaluate.ipynb").exists()


def test_all_stages_are_checked_before_any_runs(tmp_path, outputs):
    nb, params = _project(
        tmp_path,
        {"01_collect": STAGE_COLLECT, "06_evaluate": STAGE_API},
        {
            "common.p.yaml": f"run: checked\nstages: {STAGES}\nmodels: {{vlm: {{backend: tiny, name: llava}}}}\n",
            "06_evaluate.p.yaml": "nope: 1\n",
        },
    )
    with pytest.raises(pipeline.ParamsError, match="06_evaluate.p.yaml"):
        pipeline.run(
            "p", stages=["01_collect"], notebooks_dir=nb, params_dir=params, progress=False
        )
    assert not (outputs / "checked").exists()


def test_preflight_names_the_model_the_file_and_the_fix_before_anything_runs(
    tmp_path, outputs, monkeypatch
):
    monkeypatch.delenv("VQALAB_NO_SUCH_KEY", raising=False)
    nb, params = _project(
        tmp_path,
        {"01_collect": STAGE_COLLECT, "06_evaluate": STAGE_API},
        {
            "common.p.yaml": "run: pre\nstages: [01_collect, 06_evaluate]\nmodels:\n"
            "  vlm: {backend: hf, name: no-such-org/no-such-model}\n"
            "  api: {backend: openai, name: gpt-x, api_key_env: VQALAB_NO_SUCH_KEY}\n"
            "  served: {backend: openai, name: m, base_url: 'http://127.0.0.1:9/v1'}\n",
            "06_evaluate.p.yaml": "models: {vlm: vlm, api: api, served: served}\n",
        },
    )
    with pytest.raises(pipeline.PreflightFailed) as e:
        pipeline.run("p", notebooks_dir=nb, params_dir=params, progress=False)
    lines = str(e.value).splitlines()
    assert "3 problem(s), nothing has run" in lines[0]
    assert any(
        "model 'vlm' (no-such-org/no-such-model) (common.p.yaml models.vlm)" in x
        and "not in the local hub cache" in x
        for x in lines
    ), lines  # the tests run offline
    assert any("VQALAB_NO_SUCH_KEY is not set" in x for x in lines)
    assert any("no server answers at http://127.0.0.1:9/v1" in x for x in lines)
    assert not (outputs / "pre" / "01_collect").exists()


def test_api_key_never_reaches_outputs(tmp_path, outputs, monkeypatch):
    key = "sk-live-DO-NOT-LEAK-4242"
    monkeypatch.setenv("VQALAB_PIPELINE_KEY", key)
    with OpenAIStub(models=[{"id": "stub", "root": "stub", "max_model_len": 64}]) as server:
        nb, params = _project(
            tmp_path,
            {"06_evaluate": STAGE_API},
            {
                "common.p.yaml": f"run: secret\nstages: [06_evaluate]\nmodels:\n  api: {{backend: openai, name: stub, "
                f"base_url: '{server.url}', api_key_env: VQALAB_PIPELINE_KEY}}\n",
                "06_evaluate.p.yaml": "models: {api: api}\n",
            },
        )
        pipeline.run(
            "p", notebooks_dir=nb, params_dir=params, progress=False
        )  # the preflight passes too
        assert server.auth_headers == {f"Bearer {key}"}  # the key was really used
    files = [p for p in outputs.rglob("*") if p.is_file()]
    assert any(p.name == "06_evaluate.ipynb" for p in files) and any(
        p.name.startswith("calls.sqlite") for p in files
    )
    leaked = [p for p in files if key.encode() in p.read_bytes()]
    assert leaked == []


def test_cli_reports_bad_params_with_exit_code():
    result = subprocess.run(
        [sys.executable, "-m", "lib.pipeline", "--profile", "demoo", "--check"],
        capture_output=True,
        text=True,
    )
    assert (
        result.returncode == 1
        and "unknown profile 'demoo'" in result.stderr
        and "did you mean 'demo'" in result.stderr
    )


@pytest.mark.parametrize("profile", profiles())
def test_every_shipped_profile_resolves_every_stage_it_declares(profile):
    plan = pipeline.plan(profile)
    assert plan.steps, f"profile {profile} runs no stage"
    assert plan.run and all(s.resolved.profile.name == profile for s in plan.steps)
    assert set(plan.skipped) | {s.stage for s in plan.steps} == set(pipeline.STAGE_CONFIGS)


@pytest.mark.parametrize(
    "error, message",
    [
        (
            "gated",
            "gated: accept its licence at https://huggingface.co/org/model and export HF_TOKEN",
        ),
        ("missing", "no such model on the hub (misspelt?"),
        ("network", "the hub is unreachable (ConnectionError)"),
    ],
)
def test_preflight_says_why_an_online_hub_id_cannot_be_loaded(
    monkeypatch, tmp_path, error, message
):
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    from lib.pipeline import preflight

    def refuse(self, repo_id, token=None):
        cls = {"gated": GatedRepoError, "missing": RepositoryNotFoundError}.get(
            error, ConnectionError
        )
        e = cls.__new__(
            cls
        )  # the hub's errors want an HTTP response to be built; the type is what counts
        Exception.__init__(e, "refused")
        raise e

    monkeypatch.setattr(HfApi, "auth_check", refuse)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # nothing cached
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert message in preflight.hub_problem("org/model", offline=False)


def test_setup_steps_write_images_and_datasets_and_finish_refuses_an_invalid_constrained_answer(
    tmp_path,
):
    import pandas as pd

    from lib.stages import setup

    images = setup.sample_images(tmp_path)
    assert images and all(p.parent == tmp_path / "images" and p.exists() for p in images)
    assert setup.datasets(setup.SetupConfig(demo_datasets=False), tmp_path) == {}
    folders = setup.datasets(setup.SetupConfig(), tmp_path)
    assert len(folders) == 3 and all(
        (f / "items.jsonl").exists() and f.parent == tmp_path / "datasets" for f in folders.values()
    )
    answers = pd.DataFrame(
        [
            {"model": "m", "method": "constrained", "valid": False},
            {"model": "m", "method": "free", "valid": True},
        ]
    )
    with pytest.raises(
        RuntimeError, match=r"1 constrained probe answer\(s\) invalid \(models \['m'\]\)"
    ):
        setup.finish(setup.SetupConfig(), tmp_path, images, answers, folders)
    summary = json.loads((tmp_path / "summary.json").read_text())  # written before refusing
    assert (summary["probe_answers"], summary["constrained_invalid"]) == (2, 1)
    assert summary["datasets"] == {k: str(v) for k, v in folders.items()}


def test_the_kernels_talk_over_ipc_and_print_no_transport_warning(tmp_path, outputs, capfd):
    """The notebooks' kernels use Unix sockets, not TCP: the run prints no "Kernel is running over
    TCP without encryption" (ipykernel writes it to the stderr the kernel inherits)."""
    nb, params = _project(
        tmp_path, {"01_collect": STAGE_COLLECT}, {"common.p.yaml": "run: r\nstages: [01_collect]\n"}
    )
    pipeline.run("p", notebooks_dir=nb, params_dir=params, progress=False)
    said = capfd.readouterr()
    assert "[01_collect] done in" in said.out and "TCP" not in said.err + said.out
    assert pipeline._kernel_config().KernelManager.transport == "ipc"
