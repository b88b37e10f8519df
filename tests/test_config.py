"""One contract per stage: the config dataclass is the single source of defaults, params are
checked to the nested value with the file and key named, and each stage's command line writes
what its notebook writes."""

import ast
import json
import subprocess
import sys
from dataclasses import fields

import papermill
import pytest
import yaml

from lib.config import ParamsError, StageConfig, resolve
from lib.core.paths import NOTEBOOKS, PARAMS
from lib.io import artifacts
from lib.pipeline import execute as pipeline
from lib.stages.evaluate import EvalConfig
from lib.stages.scrapbook import ScrapbookConfig


@pytest.mark.parametrize("stage", artifacts.STAGES)
def test_a_notebook_parameters_cell_names_the_profile_and_run_only_never_a_stage_value(stage):
    declared = papermill.inspect_notebook(str(NOTEBOOKS / f"{stage}.ipynb"))
    assert set(declared) == set(pipeline.NOTEBOOK_PARAMETERS), stage
    assert {k: ast.literal_eval(p["default"]) for k, p in declared.items()} == {
        "profile": "",
        "run": "",
        "overrides": {},
    }


@pytest.mark.parametrize("stage", artifacts.STAGES)
def test_every_config_field_is_settable_from_a_profile(stage, tmp_path):
    """Each field of the stage's class, set in a profile's stage file to its default, is accepted."""
    cls = pipeline.STAGE_CONFIGS[stage]
    models = {
        "vlm": {"backend": "tiny", "name": "llava"},
        "llm": {"backend": "tiny", "name": "smollm2"},
    }
    (tmp_path / "common.p.yaml").write_text(
        yaml.safe_dump({"run": "r", "stages": [stage], "models": models})
    )
    values = cls.defaults()
    if stage == artifacts.TRAIN:
        values["dataset"] = "stage:04_scrapbook/datasets/scrapbook"
    (tmp_path / f"{stage}.p.yaml").write_text(yaml.safe_dump(values))
    resolved = resolve(cls, "p", params_dir=tmp_path)
    assert set(resolved.origins) >= {f.name for f in fields(cls)}
    assert all(
        resolved.origins[f.name].endswith(f"{stage}.p.yaml")
        for f in fields(cls)
        if f.name in values
    )


def test_a_nested_value_at_fault_is_named_with_its_file_and_key():
    with pytest.raises(ParamsError, match=r"06\.yaml: models\.trained\.backend must be one of"):
        EvalConfig.from_params(
            {"models": {"trained": {"backend": "hff", "name": "x"}}}, source="06.yaml"
        )
    with pytest.raises(ParamsError, match=r"06\.yaml: parameter 'styles'\[1\] must be str"):
        EvalConfig.from_params({"styles": ["zero_shot", 3]}, source="06.yaml")
    with pytest.raises(
        ParamsError,
        match=r"06\.yaml: models\.a names model 'tiny', which the profile does not declare",
    ):
        EvalConfig.from_params({"models": {"a": "tiny"}}, source="06.yaml")
    with pytest.raises(ParamsError, match=r"06\.yaml: parameter 'models'\.a must be dict"):
        EvalConfig.from_params({"models": {"a": 3}}, source="06.yaml")
    with pytest.raises(ParamsError, match=r"04\.yaml: sets\.train: .*objects_per_image=9"):
        ScrapbookConfig.from_params({"sets": {"train": {"objects_per_image": 9}}}, source="04.yaml")
    with pytest.raises(ParamsError, match=r"api_key_env"):
        EvalConfig.from_params(
            {"judge": {"backend": "openai", "name": "j", "api_key": "sk-123"}}, source="06.yaml"
        )
    with pytest.raises(ParamsError, match=r"unknown parameter\(s\) \['judge_model'\]"):
        EvalConfig.from_params({"judge_model": {}}, source="06.yaml")


def test_pipeline_check_validates_nested_values_of_the_shipped_profile(tmp_path):
    params = tmp_path / "params"
    params.mkdir()
    for p in PARAMS.glob("*.demo.yaml"):
        (params / p.name).write_text(p.read_text())
    assert pipeline.plan("demo", params_dir=params)  # the shipped demo passes
    bad = yaml.safe_load((params / "common.demo.yaml").read_text())
    bad["models"]["student"]["backend"] = "tinny"
    (params / "common.demo.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(ParamsError, match=r"common\.demo\.yaml: models\.student\.backend"):
        pipeline.plan("demo", params_dir=params)


def test_every_stage_config_is_a_stage_config_with_a_command_line():
    for stage, cls in pipeline.STAGE_CONFIGS.items():
        assert issubclass(cls, StageConfig), stage
        cls.from_params({}, source="defaults") if stage not in (
            artifacts.TRAIN,
        ) else None  # defaults are valid
    with pytest.raises(ParamsError, match="dataset must name a dataset folder"):
        pipeline.STAGE_CONFIGS[artifacts.TRAIN].from_params({}, source="defaults")


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_the_command_line_writes_what_the_notebook_writes(tmp_path, monkeypatch):
    """Stage 01 both ways on the demo source: the same files, a summary and the provenance."""
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    nb_out = tmp_path / "outputs" / "nb"
    (nb_out / "executed").mkdir(parents=True)
    papermill.execute_notebook(
        str(NOTEBOOKS / "01_collect.ipynb"),
        str(nb_out / "executed" / "01.ipynb"),
        parameters={"profile": "smoke", "run": "nb"},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    params = tmp_path / "01.yaml"
    params.write_text(yaml.safe_dump({"sources": [{"kind": "demo"}]}))
    cli_out = tmp_path / "outputs" / "cli" / artifacts.COLLECT
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "lib.stages.collect",
            "--params",
            str(params),
            "--out",
            str(cli_out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert _files(nb_out / artifacts.COLLECT) == _files(cli_out)
    assert {"summary.json", "provenance.json", "manifest.jsonl"} <= set(_files(cli_out))
    summary = json.loads((cli_out / "summary.json").read_text())
    assert summary == json.loads(r.stdout) and summary["manifest"] > 0
    assert json.loads((cli_out / "provenance.json").read_text())["params"]["sources"] == [
        {"kind": "demo"}
    ]


def test_a_notebook_opened_as_it_is_resolves_the_demo_profile(monkeypatch):
    """JupyterLab, no edits: profile "" and no $VQALAB_PROFILE -> the demo, its run folder."""
    from lib.stages.collect import CollectConfig

    monkeypatch.delenv("VQALAB_PROFILE", raising=False)
    r = resolve(CollectConfig, "", None, {})
    assert (r.profile.name, r.run) == ("demo", "demo")
    monkeypatch.setenv("VQALAB_PROFILE", "smoke")
    assert resolve(CollectConfig, "", None, {}).run == "smoke"
    assert (
        resolve(CollectConfig, "real", "mine", {"near_duplicate_distance": 2}).origins[
            "near_duplicate_distance"
        ]
        == "overrides"
    )


def test_an_extending_profile_reads_its_parent_files_first_and_adds_its_models():
    real, served = pipeline.plan("real"), pipeline.plan("real_vllm")
    assert served.profile.stages == real.profile.stages and served.run == "real_vllm"
    ev = next(s for s in served.steps if s.stage == artifacts.EVALUATE).resolved
    assert ev.files == [
        "params/common.real_vllm.yaml",
        "params/06_evaluate.real.yaml",
        "params/06_evaluate.real_vllm.yaml",
    ]
    assert set(ev.cfg.models) == {"trained", "base", "qwen2-vl-72b", "gpt-4o"}
    assert ev.cfg.judge == real.profile.models["llm"]  # everything else as the parent says
