"""The shipped one-GPU profile (params/*.real.yaml) and the README's quick starts run end to end as a
user types them - ``make run PROFILE=real``, a four-line profile of one's own model, one's own
dataset checked, imported and evaluated - offline on CPU, against a hub-layout cache holding tiny
random models saved under exactly the repo ids the profiles name. Test overrides only shrink budgets
(steps, items, iterations, dataset sizes); every other value of every stage comes from the
profile's own files, which each stage's provenance.json must show."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lib.core.paths import PARAMS, ROOT
from lib.io import artifacts
from lib.pipeline import execute as pipeline

from .support.hub_cache import BUILDERS, save_under_repo_id

PROFILE = "real"
SMALL = dict(n_sets=1, n_backgrounds=1, n_arrangements=1, n_region_pairs=1, n_questions_per_type=1)
# Budgets only: what a user would lower for a first try on a small machine.
SHRINK = {
    "03_adversarial_filter": {"max_iterations": 1, "max_skeletons": 6},
    "04_scrapbook": {
        **SMALL,
        "sets": {
            "train": {
                **SMALL,
                "n_sets": 2,
                "n_backgrounds": 2,
                "n_arrangements": 3,  # 36 images
                "types": ["presence"],
                "groups": ["np"],
                "forms": ["original"],
            },
            "fresh": {**SMALL, "types": ["presence"], "groups": ["np"]},
        },
    },
    "05_train": {
        "epochs": 0.0,
        "max_steps": 2,
        "batch_size": 2,
        "grad_accum": 1,
        "eval_every": 2,
        "checkpoint_every": 2,
        "eval_items": 4,
        "max_test": 8,
    },
    "06_evaluate": {
        "max_items": 4,
        "n_resamples": 20,
        "max_new_tokens": 8,
        "cot_max_new_tokens": 8,
        "judge_max_new_tokens": 16,
        "tasks": {  # the profile's task options without their token limits
            name: {k: v for k, v in block.items() if k != "max_new_tokens"}
            for name, block in yaml.safe_load((PARAMS / f"06_evaluate.{PROFILE}.yaml").read_text())[
                "tasks"
            ].items()
        },
    },
}


# Values a stage records as it resolved them (besides stage: paths, recorded as paths): 06 folds
# the demo datasets into `datasets` and records demo_data as done.
RECORDED_RESOLVED = {("06_evaluate", "demo_data")}


def hub_ids(plan) -> set[str]:
    """Every hub id the profile's resolved stages name."""
    from lib.pipeline.preflight import uses

    ids = set()
    for _, spec, _ in uses(plan.steps):
        name = spec if isinstance(spec, str) else spec.get("name", "")
        if (isinstance(spec, str) or spec.get("backend") == "hf") and not artifacts.is_run_output(
            name
        ):
            ids.add(name)
    return ids


def readme_block(heading: str) -> str:
    """The first ```bash block under a README heading."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(heading) :]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """$HF_HOME with every hub id of the shipped profiles and the README's own model."""
    hf_home = tmp_path_factory.mktemp("hf")
    for repo_id in BUILDERS:
        save_under_repo_id(hf_home, repo_id)
    return hf_home


def _env(hub, outputs, **more) -> dict:
    env = {
        **os.environ,
        "HF_HOME": str(hub),
        "VQALAB_OUTPUTS": str(outputs),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        **more,
    }
    env.pop("VQALAB_PROFILE", None)
    return env


def _make_run(profile: str, env: dict, tmp_path) -> subprocess.CompletedProcess:
    shrink = tmp_path / "shrink.yaml"
    shrink.write_text(yaml.safe_dump(SHRINK))
    r = subprocess.run(
        ["make", "run", f"PROFILE={profile}", f"ARGS=--overrides {shrink}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def _check_provenance(plan, folder, shrunk: dict) -> None:
    """Every stage read the profile's own values: each field from the file the plan resolved it from."""
    for step in plan.steps:
        prov = json.loads((folder / step.stage / "provenance.json").read_text())
        assert prov["profile"] == plan.profile.name and prov["run"] == plan.run, step.stage
        mine = shrunk.get(step.stage, {})
        for field, source in prov["params_from"].items():
            assert source == ("overrides" if field in mine else step.resolved.origins[field]), (
                step.stage,
                field,
            )
            value = json.loads(json.dumps(getattr(step.resolved.cfg, field), default=str))
            if (
                field not in mine
                and "stage:" not in json.dumps(value)
                and (step.stage, field) not in RECORDED_RESOLVED
            ):
                assert prov["params"][field] == value, (step.stage, field)
        assert set(step.resolved.origins) - set(mine) <= set(prov["params_from"]), step.stage


def test_every_hub_id_of_the_shipped_real_profiles_has_a_tiny_stand_in():
    for profile in ("real", "real_vllm"):
        assert hub_ids(pipeline.plan(profile)) <= set(BUILDERS), (
            "add a builder to tests/support/hub_cache.py"
        )


@pytest.mark.slow
def test_make_run_real_offline_against_a_hub_cache_of_tiny_models(hub, tmp_path):
    outputs = tmp_path / "outputs"
    r = _make_run(PROFILE, _env(hub, outputs), tmp_path)
    assert (
        "preflight" not in r.stderr
        and "00_setup               runs: params/common.real.yaml" in r.stdout
    )
    _check_provenance(pipeline.plan(PROFILE), outputs / PROFILE, SHRINK)
    setup = json.loads((outputs / PROFILE / artifacts.SETUP / "provenance.json").read_text())
    assert setup["params"]["models"]["vlm"]["name"] == "Qwen/Qwen2-VL-7B-Instruct"
    train = json.loads((outputs / PROFILE / artifacts.TRAIN / "provenance.json").read_text())[
        "params"
    ]
    assert (train["lora_r"], train["lr"], train["full_finetune"], train["model"]["name"]) == (
        8,
        1e-5,
        False,
        "Qwen/Qwen2-VL-7B-Instruct",
    )
    assert (
        outputs / PROFILE / artifacts.TRAIN / "best" / "adapter_config.json"
    ).exists()  # LoRA, as the preset says
    metrics = artifacts.read_table(outputs / PROFILE, artifacts.EVALUATE, artifacts.METRICS)
    assert {"trained", "base"} <= set(metrics.model)
    assert (outputs / PROFILE / "report.html").exists()


@pytest.mark.slow
def test_your_model_quick_start(hub, tmp_path):
    """README "Your model": the four-line profile, then make run PROFILE=mine."""
    block = readme_block("### Your model")
    profile = re.search(r"<<'YAML'\n(.*?)\nYAML\n", block, re.S).group(1)
    assert "make run PROFILE=mine" in block
    params = tmp_path / "params"
    shutil.copytree(PARAMS, params)
    (params / "common.mine.yaml").write_text(profile + "\n")
    outputs = tmp_path / "outputs"
    _make_run("mine", _env(hub, outputs, VQALAB_PARAMS=str(params)), tmp_path)
    plan = pipeline.plan("mine", params_dir=params)
    _check_provenance(plan, outputs / "mine", SHRINK)
    setup = json.loads((outputs / "mine" / artifacts.SETUP / "provenance.json").read_text())[
        "params"
    ]["models"]
    assert (
        setup["vlm"]["name"] == "Qwen/Qwen2-VL-2B-Instruct"
        and setup["llm"]["name"] == "Qwen/Qwen2.5-7B-Instruct"
    )
    assert set(
        artifacts.read_table(outputs / "mine", artifacts.EVALUATE, artifacts.METRICS).model
    ) >= {"trained", "base"}


def test_your_dataset_quick_start(hub, tmp_path):
    """README "Your dataset", command for command, in a folder holding the example."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    commands = readme_block("### Your dataset").replace("\\\n", " ")
    env = _env(
        hub,
        tmp_path / "outputs",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    lines = [c.split("  #")[0].strip() for c in commands.splitlines()]
    for line in [
        x for x in lines if x and not x.startswith("source ")
    ]:  # the venv's python is on PATH here
        r = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
        )
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
    out = tmp_path / "outputs" / "mine" / "06_evaluate"
    metrics = pd.read_csv(out / "metrics.csv")
    assert set(metrics.model) == {"base"} and set(metrics.dataset) == {"mine"}
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["profile"] == "real" and prov["params_from"]["models"] == "overrides"
    assert (
        prov["params"]["models"]["base"]["name"] == "Qwen/Qwen2-VL-7B-Instruct"
    )  # the profile's vlm, by name
