"""The shipped one-GPU profile (params/*.real.yaml) runs end to end as a user types it -
``make run PROFILE=real`` - offline on CPU, against a hub-layout cache holding tiny random models
saved under exactly the repo ids it names. Test overrides only shrink budgets (steps, items,
iterations, dataset sizes); every other value of every stage comes from the profile's own files."""

import json
import os
import subprocess

import pytest
import yaml

from lib import artifacts as A
from lib import pipeline
from lib.paths import ROOT

from .support.hub_cache import BUILDERS, save_under_repo_id

PROFILE = "real"
SMALL = dict(n_sets=1, n_backgrounds=1, n_arrangements=1, n_region_pairs=1, n_questions_per_type=1)
# Budgets only: what a user would lower for a first try on a small machine.
SHRINK = {
    "03_adversarial_filter": {"max_iterations": 1},
    "04_scrapbook": {**SMALL, "sets": {"train": {**SMALL, "n_sets": 2, "n_backgrounds": 2, "n_arrangements": 3,  # 36 images
                                                 "types": ["presence"], "groups": ["np"], "forms": ["original"]},
                                       "fresh": {**SMALL, "types": ["presence"], "groups": ["np"]}}},
    "05_train": {"epochs": 0.0, "max_steps": 2, "batch_size": 2, "grad_accum": 1, "eval_every": 2,
                 "checkpoint_every": 2, "eval_items": 4, "max_test": 8},
    "06_evaluate": {"max_items": 4, "n_resamples": 20, "max_new_tokens": 8, "cot_max_new_tokens": 8,
                    "judge_max_new_tokens": 16, "task_max_new_tokens": {}},
}


def hub_ids(plan) -> set[str]:
    """Every hub id the profile's resolved stages name."""
    from lib.preflight import uses

    ids = set()
    for _, spec, _ in uses(plan.steps):
        name = spec if isinstance(spec, str) else spec.get("name", "")
        if (isinstance(spec, str) or spec.get("backend") == "hf") and not name.startswith(("stage:", "run:")):
            ids.add(name)
    return ids


def test_every_hub_id_of_the_real_profile_has_a_tiny_stand_in():
    assert hub_ids(pipeline.plan(PROFILE)) == set(BUILDERS), "add a builder to tests/support/hub_cache.py"


@pytest.mark.slow
def test_make_run_real_offline_against_a_hub_cache_of_tiny_models(tmp_path):
    hf_home = tmp_path / "hf"
    for repo_id in hub_ids(pipeline.plan(PROFILE)):
        save_under_repo_id(hf_home, repo_id)
    outputs = tmp_path / "outputs"
    shrink = tmp_path / "shrink.yaml"
    shrink.write_text(yaml.safe_dump(SHRINK))
    env = {**os.environ, "HF_HOME": str(hf_home), "VQALAB_OUTPUTS": str(outputs), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("VQALAB_PROFILE", None)
    r = subprocess.run(["make", "run", f"PROFILE={PROFILE}", f"ARGS=--overrides {shrink}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "preflight" not in r.stderr
    plan = pipeline.plan(PROFILE)
    for step in plan.steps:
        prov = json.loads((outputs / PROFILE / step.stage / "provenance.json").read_text())
        assert prov["profile"] == PROFILE and prov["run"] == PROFILE, step.stage
        shrunk = SHRINK.get(step.stage, {})
        for field, source in prov["params_from"].items():
            assert source == ("overrides" if field in shrunk else step.resolved.origins[field]), (step.stage, field)
            value = json.loads(json.dumps(getattr(step.resolved.cfg, field), default=str))
            if field not in shrunk and not str(value).startswith("stage:"):  # stage: paths are recorded resolved
                assert prov["params"][field] == value, (step.stage, field)
        assert set(step.resolved.origins) - set(shrunk) <= set(prov["params_from"]), step.stage
    setup = json.loads((outputs / PROFILE / A.SETUP / "provenance.json").read_text())
    assert setup["params"]["models"]["vlm"]["name"] == "Qwen/Qwen2-VL-7B-Instruct"
    train = json.loads((outputs / PROFILE / A.TRAIN / "provenance.json").read_text())["params"]
    assert (train["lora_r"], train["lr"], train["full_finetune"], train["model"]["name"]) == \
        (8, 1e-5, False, "Qwen/Qwen2-VL-7B-Instruct")
    metrics = A.read_table(outputs / PROFILE, A.EVALUATE, A.METRICS)
    assert {"trained", "base"} <= set(metrics.model)
    assert (outputs / PROFILE / "report.html").exists()
