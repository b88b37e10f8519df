"""A profile's ``cluster:`` block (:mod:`lib.pipeline.scheduler.cluster`) is checked where the profile is read, and the
job scripts docs/scale-out.md shows are the ones :mod:`lib.pipeline.scheduler.slurm` generates for the profile
shown there. The jobs themselves run against a real slurmctld in tests/services/test_slurm.py."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lib.config import ParamsError, load_profile
from lib.core.paths import ROOT
from lib.pipeline import execute as pipeline
from lib.pipeline.scheduler import slurm
from lib.pipeline.scheduler.cluster import cluster_of

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
        ({"stages": {"05_train": {"shards": 2}}}, "05_train would run in 2 shards; only 04_scr"),
        ({"shards": 0}, "shards: must be at least 1, got 0"),
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
            stage = re.search(r"--job-name=vqalab-\S+?-(\d\d_[\w.]+)", code).group(1)
            scripts[stage] = code
    return profile, scripts


def generated(tmp_path, monkeypatch, profile: dict, names: list[str]) -> dict[str, str]:
    """The scripts :func:`lib.pipeline.scheduler.slurm.job_script` writes for ``profile`` (extending the
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
    for name in names:  # a stage's, or its array's (<stage>.shards)
        script = slurm.job_script(p, steps[name.split(".")[0]], {}, name)
        for old, new in swaps:
            script = script.replace(old, new)
        out[name] = script
    return out


def test_the_job_scripts_on_the_scale_out_page_are_the_generated_ones(tmp_path, monkeypatch):
    profile, shown = page_example()
    assert profile["extends"] == "real"
    assert {"04_scrapbook", "05_train", "06_evaluate.shards", "06_evaluate"} <= set(shown)
    made = generated(tmp_path, monkeypatch, profile, list(shown))
    for stage, script in shown.items():
        assert script == made[stage], (
            f"{PAGE.name}: the {stage} job script differs from the generated one; paste this:\n"
            f"{made[stage]}"
        )
    assert "srun" in shown["05_train"] and "--nnodes 2" in shown["05_train"]
    assert "--local" in shown["04_scrapbook"] and "srun" not in shown["04_scrapbook"]
    assert "#SBATCH --array=0-3" in shown["06_evaluate.shards"]
    assert (
        'shard --profile mycluster --run mycluster --shard "$SLURM_ARRAY_TASK_ID" --num-shards 4'
        in shown["06_evaluate.shards"]
    )
    assert "merge --profile mycluster --run mycluster --num-shards 4" in shown["06_evaluate"]


class FakeSlurm:
    """``sbatch`` and ``scontrol``/``scancel`` as :func:`lib.pipeline.scheduler.slurm.slurm` runs them: each
    submission recorded with its options and given the next job id; a job's state read from
    :attr:`shown` (``scontrol show job -o`` lines by job id)."""

    def __init__(self):
        self.submitted: list[tuple[str, list[str], str]] = []  # (job id, options, script)
        self.shown: dict[str, str] = {}
        self.cancelled: list[str] = []

    def __call__(self, *argv: str) -> str:
        if argv[0] == "sbatch":
            job_id = str(100 + len(self.submitted))
            self.submitted.append((job_id, list(argv[1:-1]), Path(argv[-1]).read_text()))
            return f"{job_id}\n"
        if argv[0] == "scancel":
            self.cancelled += argv[1:]
            return ""
        if argv[:3] == ("scontrol", "show", "job"):
            return self.shown.get(argv[-1], "")
        return ""


def _sharded_plan(tmp_path, monkeypatch, overrides: dict | None = None, sharded="06_evaluate"):
    """The smoke profile's 04-06 with ``sharded`` in two shards, its outputs in ``tmp_path``; Slurm
    faked."""
    stages = ["00_setup", "01_collect", "02_annotate", "03_adversarial_filter", "04_scrapbook"]
    block = {"time": "10", "stages": {sharded: {"shards": 2}}}
    params = _params(
        tmp_path, "smoke", {"cluster": block, "stages": stages + ["05_train", "06_evaluate"]}
    )
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    fake = FakeSlurm()
    monkeypatch.setattr(slurm, "slurm", fake)
    again = ["04_scrapbook", "05_train", "06_evaluate"]
    return pipeline.plan("mine", again, overrides=overrides, params_dir=params), fake


def _chained(fake) -> list[str]:
    """What each submitted job waits for: its --dependency, or --hold for the first."""
    return [
        next((o for o in opts if o.startswith("--dependency")), "--hold")
        for _, opts, _ in fake.submitted
    ]


def test_a_stage_in_shards_is_an_array_then_a_merge_with_the_next_stage_after_the_merge(
    tmp_path, monkeypatch
):
    p, fake = _sharded_plan(tmp_path, monkeypatch)
    jobs = slurm._submit(p, {})
    assert [(j.label, j.array) for j in jobs] == [
        ("04_scrapbook", 0),
        ("05_train", 0),
        ("06_evaluate shards", 2),
        ("06_evaluate", 0),
    ]
    assert _chained(fake) == [
        "--hold",
        "--dependency=afterok:100",
        "--dependency=afterok:101",
        "--dependency=afterok:102",
    ]
    array, merge = fake.submitted[2][2], fake.submitted[3][2]
    assert "#SBATCH --array=0-1" in array and "%A_%a.log" in array and "--array" not in merge
    task = '--shard "$SLURM_ARRAY_TASK_ID" --num-shards 2'
    assert f"-m lib.stages.evaluate shard --profile mine --run smoke {task}" in array
    assert "-m lib.stages.evaluate merge --profile mine --run smoke --num-shards 2\n" in merge
    assert "--local" not in array + merge and "--local" in fake.submitted[0][2]
    assert jobs[2].log.endswith("slurm/06_evaluate.shards.102_%a.log")
    assert Path(jobs[2].script).name == "06_evaluate.shards.sbatch"


def test_stage_04_in_shards_is_an_array_of_scrapbook_shards_then_its_merge_before_stage_05(
    tmp_path, monkeypatch
):
    p, fake = _sharded_plan(tmp_path, monkeypatch, sharded="04_scrapbook")
    jobs = slurm._submit(p, {})
    assert [(j.label, j.array) for j in jobs] == [
        ("04_scrapbook shards", 2),
        ("04_scrapbook", 0),
        ("05_train", 0),
        ("06_evaluate", 0),
    ]
    assert _chained(fake) == [
        "--hold",
        "--dependency=afterok:100",
        "--dependency=afterok:101",
        "--dependency=afterok:102",
    ]
    array, merge = fake.submitted[0][2], fake.submitted[1][2]
    assert "#SBATCH --array=0-1" in array and "04_scrapbook.shards.%A_%a.log" in array
    assert "--array" not in merge and "--output=" in merge and "04_scrapbook.%j.log" in merge
    task = '--shard "$SLURM_ARRAY_TASK_ID" --num-shards 2'
    assert f"-m lib.stages.scrapbook shard --profile mine --run smoke {task}\n" in array
    assert "-m lib.stages.scrapbook merge --profile mine --run smoke --num-shards 2\n" in merge
    assert "--local" not in array + merge
    assert all("--local" in script for _, _, script in fake.submitted[2:])  # 05, 06: notebooks
    assert Path(jobs[0].script).name == "04_scrapbook.shards.sbatch"
    assert jobs[0].log.endswith("slurm/04_scrapbook.shards.100_%a.log")


def test_the_shards_and_the_merge_take_the_overrides_of_the_command_line(tmp_path, monkeypatch):
    """``--set 06_evaluate.max_items=4`` reaches every shard and the merge as a params file."""
    p, fake = _sharded_plan(tmp_path, monkeypatch, {"06_evaluate": {"max_items": 4}})
    slurm._submit(p, {"06_evaluate": {"max_items": 4}})
    params = tmp_path / "outputs" / "smoke" / "slurm" / "06_evaluate.params.yaml"
    assert yaml.safe_load(params.read_text()) == {"max_items": 4}
    for _, _, script in fake.submitted[2:]:
        assert f"--num-shards 2 --params {params}\n" in script


def test_a_failed_task_of_an_array_stops_the_wait_with_its_own_log(tmp_path, monkeypatch):
    p, fake = _sharded_plan(tmp_path, monkeypatch)
    jobs = slurm._submit(p, {})
    array, merge = jobs[2], jobs[3]
    Path(array.log.replace("%a", "1")).write_text("asking...\nRuntimeError: out of memory\n")
    fake.shown[array.job_id] = (
        f"JobId=103 ArrayJobId={array.job_id} ArrayTaskId=0 JobState=RUNNING\n"
        f"JobId=104 ArrayJobId={array.job_id} ArrayTaskId=1 JobState=FAILED\n"
    )
    fake.shown[merge.job_id] = f"JobId={merge.job_id} JobState=PENDING"
    with pytest.raises(slurm.SlurmError) as e:
        slurm._wait_one(array, [merge], 0.01)
    said = str(e.value)
    assert f"job {array.job_id} (task 1 of its array) ended FAILED" in said
    assert "06_evaluate.shards.102_1.log, which ends:" in said and "| RuntimeError: out of" in said
    assert fake.cancelled == [array.job_id, merge.job_id]  # its other task, and the merge


def _tasks(*states: str) -> str:
    """``scontrol show job -o`` of an array's tasks (0, 1...) in these states."""
    return "\n".join(f"JobId={103 + k} ArrayTaskId={k} JobState={s}" for k, s in enumerate(states))


@pytest.mark.parametrize(
    "shown, state",
    [
        ("JobId=102 ArrayJobId=102 ArrayTaskId=0-1 JobState=PENDING", "PENDING"),
        (_tasks("COMPLETED", "PENDING"), "PENDING"),
        (_tasks("COMPLETED", "RUNNING"), "RUNNING"),
        (_tasks("COMPLETED", "COMPLETED"), "COMPLETED"),
        ("", None),
    ],
)
def test_an_array_is_completed_only_when_every_task_is(monkeypatch, shown, state):
    monkeypatch.setattr(slurm, "slurm", lambda *argv: shown)
    job = slurm.Job("06_evaluate", "102", "s.sbatch", "06_evaluate.shards.102_%a.log", array=2)
    assert slurm.job_state(job) == (state, None)


def test_detach_without_a_cluster_block_is_refused_not_ignored(capsys):
    """``--detach`` means "submit and return"; on a profile that runs here it is an error, not a
    silent local run."""
    code = pipeline.main(["--profile", "smoke", "--stage", "00_setup", "--detach"])
    assert (
        code == 1 and "--detach: profile 'smoke' has no cluster: block" in capsys.readouterr().err
    )


HOSTILE = ["x$(touch PWNED)", "z;echo hi", "my run", "exp$1", "a\nb", "log%j", ".hidden", "-x", ""]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_run_name_that_is_not_plain_is_refused_naming_it(tmp_path, monkeypatch, capsys, name):
    monkeypatch.setenv("VQALAB_PARAMS", str(_params(tmp_path, "smoke", {"cluster": {"time": "1"}})))
    code = pipeline.main(["--profile", "mine", f"--run={name}", "--check"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and f"run name {name!r} is not a plain" in err


@pytest.mark.parametrize("name", ["my lab", "a$(id)", "p;q"])
def test_a_profile_name_that_is_not_plain_is_refused_not_split(tmp_path, name):
    params = _params(tmp_path, "smoke", {})
    (params / f"common.{name}.yaml").write_text("extends: mine\n")
    with pytest.raises(ParamsError, match=re.escape(f"profile name {name!r} is not a plain")):
        pipeline.plan(name, params_dir=params)


@pytest.mark.parametrize(
    "block, key",
    [
        ({"partition": "gpu\n#SBATCH --partition=other"}, "partition"),
        ({"account": "lab\r"}, "account"),
        ({"sbatch": ["--qos=high\ntouch PWNED"]}, "sbatch"),
        ({"stages": {"05_train": {"mem": "8G\necho"}}}, "stages.05_train.mem"),
    ],
)
def test_a_line_break_in_a_value_of_the_sbatch_header_is_refused(tmp_path, block, key):
    stages = ["00_setup", "01_collect", "02_annotate", "03_adversarial_filter", "04_scrapbook"]
    params = _params(tmp_path, "smoke", {"cluster": block, "stages": [*stages, "05_train"]})
    with pytest.raises(ParamsError, match=f"{re.escape(key)}: .* holds a line break"):
        pipeline.plan("mine", params_dir=params)


# every path a job script names, holding what a shell or sbatch would read as code or a pattern
ODD = "my dir $(touch PWNED) `touch PWNED` it's %j"
FAKES = {  # stand-ins run by the scripts: each records what it was given, NUL-separated
    "python": 'printf "%s\\0" "$VQALAB_PARAMS" "$VQALAB_OUTPUTS" "$@" > "$RECORD"',
    "srun": 'exec "$@"',
    "scontrol": 'if [ "$2" = hostnames ]; then echo n1; else echo "NodeName=n1 NodeAddr=10.0.0.1"; fi',
}


def test_job_scripts_run_odd_folders_as_data_and_nothing_but_the_stage(tmp_path, monkeypatch):
    """Every job of a profile in odd folders, run by bash with python, srun and scontrol replaced:
    each starts the stage's command with exactly its arguments and the folders as they are, and
    no word of a folder runs; sbatch reads the log's path back as the folder (``%%``: a ``%``)."""
    odd = tmp_path / ODD
    odd.mkdir()
    block = {"stages": {"05_train": {"nodes": 2}, "06_evaluate": {"shards": 2}}}
    stages = ["00_setup", "01_collect", "02_annotate", "03_adversarial_filter", "04_scrapbook"]
    params = _params(
        odd, "smoke", {"cluster": block, "stages": [*stages, "05_train", "06_evaluate"]}
    )
    outputs = odd / "outputs"
    bin_ = odd / "bin"
    bin_.mkdir()
    for name, body in FAKES.items():
        (bin_ / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_ / name).chmod(0o755)
    monkeypatch.setenv("VQALAB_PARAMS", str(params))
    monkeypatch.setenv("VQALAB_OUTPUTS", str(outputs))
    monkeypatch.setattr(sys, "executable", str(bin_ / "python"))
    p = pipeline.plan("mine", params_dir=params)
    record = tmp_path / "argv"
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "RECORD": str(record), "SLURM_JOB_ID": "7"}
    env |= {"SLURM_ARRAY_TASK_ID": "1", "SLURM_JOB_NODELIST": "n1"}
    ran = {}
    for step in p.steps:
        for name in slurm.stage_jobs(p, step):
            script = slurm.job_script(p, step, {}, name)
            output = next(line for line in script.splitlines() if "--output=" in line)
            path = shlex.split(output.split("=", 1)[1], comments=True)[0]
            assert re.sub(r"%(.)", lambda m: "%" if m[1] == "%" else "<" + m[1], path) == str(
                slurm.folder("smoke")
                / f"{name}.{'<A_<a' if name.endswith('.shards') else '<j'}.log"
            )
            done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            ran[name] = record.read_text().split("\0")[:-1]
    assert not list(tmp_path.rglob("PWNED")) and not (ROOT / "PWNED").exists()
    for name, argv in ran.items():
        assert argv[:2] == [str(params), str(outputs)], name
    common = ["--profile", "mine", "--run", "smoke"]
    for stage in stages:
        assert ran[stage][2:] == ["-m", "lib.pipeline", *common, "--stage", stage, "--local"]
    assert ran["05_train"][2:6] == ["-m", "torch.distributed.run", "--nnodes", "2"]
    out = str(outputs / "smoke" / "05_train")
    assert ran["05_train"][-5:] == ["lib.stages.train", "--profile", "mine", "--out", out]
    task = ["--shard", "1", "--num-shards", "2"]
    assert ran["06_evaluate.shards"][2:] == ["-m", "lib.stages.evaluate", "shard", *common, *task]
    merge = ["-m", "lib.stages.evaluate", "merge", *common, "--num-shards", "2"]
    assert ran["06_evaluate"][2:] == merge


def _queued(tmp_path, monkeypatch, overrides=None):
    """The smoke profile's 04-06 on a faked Slurm, submitted once (detached) with ``overrides``."""
    p, fake = _sharded_plan(tmp_path, monkeypatch, overrides)
    jobs = slurm.submit(p, overrides or {}, detach=True)
    return jobs, fake


def test_a_rerun_that_asks_other_values_than_queued_jobs_run_is_refused(tmp_path, monkeypatch):
    jobs, fake = _queued(tmp_path, monkeypatch)
    fake.shown = {j.job_id: f"JobId={j.job_id} ArrayTaskId=0-1 JobState=PENDING" for j in jobs}
    other, _ = _sharded_plan(tmp_path, monkeypatch, {"06_evaluate": {"max_items": 4}})
    monkeypatch.setattr(slurm, "slurm", fake)
    with pytest.raises(slurm.SlurmError, match="other stages, params or --set values"):
        slurm.submit(other, {"06_evaluate": {"max_items": 4}}, detach=True)
    same, _ = _sharded_plan(tmp_path, monkeypatch)
    monkeypatch.setattr(slurm, "slurm", fake)
    assert slurm.submit(same, {}, detach=True) == jobs and len(fake.submitted) == 4


def test_a_finished_detached_run_is_recognised_from_its_outputs_not_resubmitted(
    tmp_path, monkeypatch, capsys
):
    jobs, fake = _queued(tmp_path, monkeypatch)
    fake.shown = {j.job_id: f"JobId={j.job_id} ArrayTaskId=0 JobState=COMPLETED" for j in jobs}
    again, _ = _sharded_plan(tmp_path, monkeypatch)
    monkeypatch.setattr(slurm, "slurm", fake)
    slurm.submit(again, {}, detach=True)  # no outputs yet: submitted again
    assert len(fake.submitted) == 8
    fake.shown = {j.job_id: "" for j in jobs}  # Slurm has forgotten them all
    for step in again.steps:
        folder = tmp_path / "outputs" / "smoke" / step.stage
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "provenance.json").write_text('{"created": "9999-01-01T00:00:00+00:00"}')
    capsys.readouterr()
    assert len(slurm.submit(again, {}, detach=True)) == 4 and len(fake.submitted) == 8
    assert "finished" in capsys.readouterr().out
    (tmp_path / "outputs" / "smoke" / "05_train" / "provenance.json").unlink()
    slurm.submit(again, {}, detach=True)  # a stage's outputs are missing: submitted again
    assert len(fake.submitted) == 12
