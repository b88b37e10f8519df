"""A profile's ``cluster:`` block (:mod:`lib.scheduler.cluster`) is checked where the profile is read, and the
job scripts docs/scale-out.md shows are the ones :mod:`lib.scheduler.slurm` generates for the profile
shown there. The jobs themselves run against a real slurmctld in tests/services/test_slurm.py."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from lib import pipeline
from lib.config import ParamsError, load_profile
from lib.paths import ROOT
from lib.scheduler import slurm
from lib.scheduler.cluster import cluster_of

PAGE = ROOT / "docs" / "scale-out.md"
SECTION = "## On a Slurm cluster"
# the page's paths, for this machine's: the clone, its venv's python, params and outputs
SHOWN = {"root": "/home/me/vqalab", "python": "/home/me/vqalab/.venv/bin/python"}


def _params(tmp_path: Path, base: str, common: dict) -> Path:
    folder = tmp_path / "params"
    folder.mkdir(exist_ok=True)
    for f in (ROOT / "params").glob(f"*.{base}.yaml"):
        shutil.copy(f, folder)
    (folder / "common.mine.yaml").write_text(yaml.safe_dump({"extends": base, **common}))
    return folder


@pytest.mark.parametrize(
    "block, says",
    [
        ({"partiton": "gpu"}, "cluster: unknown key 'partiton' (did you mean 'partition'?)"),
        ({"nodes": "two"}, "cluster.nodes must be int"),
        ({"time": "4 hours"}, "time: '4 hours' is not a Slurm time"),
        ({"scheduler": "pbs"}, "scheduler: 'pbs' is not slurm"),
        ({"stages": {"04_scrapbook": {"nodes": 2}}}, "04_scrapbook would run on 2 nodes"),
        ({"stages": {"05_train": {"gpus": 2}}}, "stages.05_train: unknown key 'gpus'"),
        ({"stages": {"07_analyze": {"time": "10"}}}, "stages.07_analyze: the profile does not"),
        ({"stages": {"05_train": {"poll_s": 1}}}, "05_train.poll_s: set once for the run"),
    ],
)
def test_a_cluster_block_is_checked_before_anything_runs(tmp_path, block, says):
    stages = ["00_setup", "01_collect", "02_annotate", "03_adversarial_filter", "04_scrapbook"]
    params = _params(tmp_path, "smoke", {"cluster": block, "stages": [*stages, "05_train"]})
    with pytest.raises(ParamsError) as e:
        pipeline.plan("mine", params_dir=params)  # what make run and --check do first
    assert says in str(e.value) and "common.mine.yaml" in str(e.value)


def test_a_profile_extending_a_cluster_profile_takes_its_block_unless_it_sets_none(tmp_path):
    params = _params(tmp_path, "smoke", {"cluster": {"time": "10", "stages": {"05_train": {}}}})
    (params / "common.child.yaml").write_text("extends: mine\n")
    (params / "common.here.yaml").write_text("extends: mine\ncluster: null\n")
    child = cluster_of(load_profile("child", params))
    assert child.time == "10" and child.poll_s == 10.0 and child.for_stage("05_train").time == "10"
    assert cluster_of(load_profile("here", params)) is None
    assert cluster_of(load_profile("smoke", params)) is None


def page_example() -> tuple[dict, dict[str, str]]:
    """The section's profile (its first ```yaml block) and its job scripts (```bash blocks that
    start with #!/bin/bash), by stage."""
    text = PAGE.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", text, re.M | re.S)
    profile = yaml.safe_load(next(code for lang, code in blocks if lang == "yaml"))
    scripts = {}
    for lang, code in blocks:
        if lang == "bash" and code.startswith("#!/bin/bash"):
            stage = re.search(r"--job-name=vqalab-\S+?-(\d\d_\w+)", code).group(1)
            scripts[stage] = code
    return profile, scripts


def generated(tmp_path, monkeypatch, profile: dict, stages: list[str]) -> dict[str, str]:
    """The scripts :func:`lib.scheduler.slurm.job_script` writes for ``profile`` (extending the
    real one, as the page's does), this machine's paths replaced by the page's."""
    params = _params(tmp_path, "real", {k: v for k, v in profile.items() if k != "extends"})
    (params / "common.mine.yaml").rename(params / f"common.{profile['run']}.yaml")
    outputs = tmp_path / "outputs"
    monkeypatch.setenv("VQALAB_PARAMS", str(params))
    monkeypatch.setenv("VQALAB_OUTPUTS", str(outputs))
    p = pipeline.plan(profile["run"], params_dir=params)
    steps = {s.stage: s for s in p.steps}
    swaps = [
        (sys.executable, SHOWN["python"]),
        (str(params.resolve()), f"{SHOWN['root']}/params"),
        (str(outputs.resolve()), f"{SHOWN['root']}/outputs"),
        (str(ROOT), SHOWN["root"]),
    ]
    out = {}
    for stage in stages:
        script = slurm.job_script(p, steps[stage], {})
        for old, new in swaps:
            script = script.replace(old, new)
        out[stage] = script
    return out


def test_the_job_scripts_on_the_scale_out_page_are_the_generated_ones(tmp_path, monkeypatch):
    profile, shown = page_example()
    assert profile["extends"] == "real" and {"04_scrapbook", "05_train"} <= set(shown)
    made = generated(tmp_path, monkeypatch, profile, list(shown))
    for stage, script in shown.items():
        assert script == made[stage], (
            f"{PAGE.name}: the {stage} job script differs from the generated one; paste this:\n"
            f"{made[stage]}"
        )
    assert "srun" in shown["05_train"] and "--nnodes 2" in shown["05_train"]
    assert "--local" in shown["04_scrapbook"] and "srun" not in shown["04_scrapbook"]


def test_detach_without_a_cluster_block_is_refused_not_ignored(capsys):
    """``--detach`` means "submit and return"; on a profile that runs here it is an error, not a
    silent local run."""
    code = pipeline.main(["--profile", "smoke", "--stage", "00_setup", "--detach"])
    assert (
        code == 1 and "--detach: profile 'smoke' has no cluster: block" in capsys.readouterr().err
    )
