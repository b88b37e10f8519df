"""Stage 05 over several processes, as researchers launch it: ``torchrun --nproc_per_node 2 -m
lib.stages.train ...`` (gloo on CPU), and ``accelerate launch`` with the two-process config
docs/scale-out.md shows. ``batch_size`` is per process: two ranks with batch 2 train on the examples
one process with batch 4 draws, in the same steps, each rank its half, gradients averaged by DDP. The
torchrun run is killed after its step-4 checkpoint, the stage command resumes it; both launches are
compared with the one-process run. Eighteen steps with a validation every three: the validation
scores move (0 at first, then up), so the two-process gather is compared with numbers that differ
between steps, not with a curve of zeros.

Which ``accelerate launch`` starts two processes on a machine without a GPU: ``--cpu`` and a
``distributed_type: MULTI_CPU`` config both go to accelerate's simple launcher, which starts ONE
process unless ``mpirun`` runs it (``--mpirun_hostfile``; there is no MPI here). ``distributed_type:
MULTI_GPU`` goes to its torchrun launcher, which starts ``num_processes`` of them whatever the
hardware; the stage then asks accelerate for a CPU (gloo) group itself when there is no accelerator.

Tolerance: losses within a relative 1e-5 and weights within 1e-4, learning rates and validation
scores equal. The arithmetic is the same, not its order: each rank sums its half of the batch, DDP
adds the halves' gradients and halves them, one process sums the whole batch at once, and the
padded widths differ, so float sums differ in the last bits (seen: ~1e-7 relative on the losses);
eighteen Adam steps carry that into the weights without amplifying it past 1e-4. A validation score
would move only if such a difference flipped a greedy answer, which these few steps do not."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from lib.core.paths import ROOT
from lib.stages.train import TrainConfig
from lib.training.loop import train

TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}
PER_RANK = 2  # batch_size of each of the two ranks; the one-process run has 2 x PER_RANK
STEPS = 18  # long enough for validation to move (0, 0, .125, .375 ...): the ranks' gathered answers are compared
KILLED = """import sys

import yaml

from lib.io.folders import claim_stage
from lib.stages.train import TrainConfig
from lib.training.loop import train

claim_stage(sys.argv[2], "05_train")  # as the stage's run() claims its folder before it trains
train(TrainConfig(**yaml.safe_load(open(sys.argv[1]))), sys.argv[2], progress=False, stop_after=3)
"""
# accelerate's torchrun launcher with two processes on one machine, a free port (0: accelerate picks
# one), full precision; docs/scale-out.md shows this file as it is
TWO_PROCESSES = """compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
num_machines: 1
num_processes: 2
main_process_port: 0
mixed_precision: 'no'
"""


@pytest.fixture
def dataset(training_scenes):
    return training_scenes  # tests/conftest.py


def _fields(dataset, **kw) -> dict:
    # checkpoints at 4, 8, 12, 16: the kill after step 3 (KILLED) comes after the step-4 checkpoint is saved
    base = dict(
        model=TINY,
        dataset=str(dataset),
        full_finetune=True,
        lr=1e-3,
        warmup_steps=2,
        max_steps=STEPS,
        batch_size=PER_RANK,
        eval_every=3,
        eval_items=16,
        checkpoint_every=4,
        seed=1,
        max_test=8,
    )
    return {**base, **kw}


@pytest.fixture(scope="module")
def one_process(training_scenes, tmp_path_factory) -> tuple[Path, dict]:
    """The reference both launches are compared with: one process drawing the whole batch (2 x PER_RANK)."""
    folder = tmp_path_factory.mktemp("one")
    return folder, train(
        TrainConfig(**_fields(training_scenes, batch_size=2 * PER_RANK)), folder, progress=False
    )


def _torchrun(*args) -> subprocess.CompletedProcess:
    cmd = [
        str(Path(sys.executable).with_name("torchrun")),
        "--standalone",
        "--nproc_per_node=2",
        *map(str, args),
    ]
    return subprocess.run(
        cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=600
    )


def _accelerate(config: Path, *args) -> subprocess.CompletedProcess:
    cmd = [
        str(Path(sys.executable).with_name("accelerate")),
        "launch",
        "--config_file",
        str(config),
        *map(str, args),
    ]
    return subprocess.run(
        cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=600
    )


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def _trained_as_one(out: Path, one_process: tuple[Path, dict]) -> None:
    """The two-process run in ``out`` took the one-process run's steps, losses, schedule, scores and weights."""
    one_folder, one = one_process
    two, ref = pd.read_csv(out / "curve.csv"), pd.read_csv(one_folder / "curve.csv")
    assert (
        two["step"].tolist() == ref["step"].tolist() == list(range(1, STEPS + 1))
    )  # every step once, on one writer
    assert two["loss"].tolist() == pytest.approx(ref["loss"].tolist(), rel=1e-5)
    assert two["lr"].tolist() == pytest.approx(
        ref["lr"].tolist(), abs=1e-12
    )  # the schedule steps once a step
    scores = [c for c in ref.columns if c.startswith("val_")]
    accuracy = ref["val_accuracy"].dropna()
    assert accuracy.nunique() > 1 and accuracy.max() > 0, (
        f"validation {accuracy.tolist()} has no signal to compare"
    )
    assert scores and two[scores].equals(ref[scores])
    mine, theirs = _weights(out / "last"), _weights(one_folder / "last")
    assert mine.keys() == theirs.keys() and all(
        torch.allclose(mine[k], theirs[k], atol=1e-4) for k in mine
    )

    summary = json.loads((out / "summary.json").read_text())
    assert summary["training"]["processes"] == 2 and summary["training"]["steps"] == STEPS
    assert (
        summary["training"]["best_val_accuracy"] == one["best_val_accuracy"]
        and summary["n_test"] == 8
    )
    assert json.loads((out / "provenance.json").read_text())["stage"] == "05_train"
    assert (out / "best").is_dir() and (out / "last").is_dir()


def test_two_processes_train_as_one_with_the_whole_batch_and_resume_after_a_kill(
    dataset, one_process, tmp_path
):
    params = tmp_path / "05.yaml"
    params.write_text(yaml.safe_dump(_fields(dataset)))
    out = tmp_path / "run" / "05_train"
    (tmp_path / "killed.py").write_text(KILLED)

    killed = _torchrun(
        tmp_path / "killed.py", params, out
    )  # both ranks stop after the step-4 checkpoint
    assert killed.returncode != 0 and "stopped after step 4" in killed.stderr, killed.stderr[-3000:]
    assert [
        json.loads(line)["step"] for line in (out / "curve.jsonl").read_text().splitlines()
    ] == [1, 2, 3, 4]
    assert {"random_states_0.pkl", "random_states_1.pkl"} <= {
        p.name for p in (out / "checkpoint").iterdir()
    }

    done = _torchrun("-m", "lib.stages.train", "--params", params, "--out", out)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        done.stdout.count("resumed from") == 1 and "at step 4" in done.stdout
    )  # the main rank says it, once
    _trained_as_one(out, one_process)
    with pytest.raises(
        ValueError, match="made by 2 process"
    ):  # another process count is another global batch
        train(TrainConfig(**_fields(dataset)), out, progress=False)


def test_accelerate_launch_starts_two_processes_on_cpu_that_train_as_one(
    dataset, one_process, tmp_path
):
    """``accelerate launch --config_file <TWO_PROCESSES> -m lib.stages.train ...``, the form docs/scale-out.md
    gives, starts two ranks without a GPU that join one gloo group: the run counts 2 processes and
    matches the one-process run as torchrun's does (the resume after a kill is torchrun's test: the
    launcher does not change it)."""
    assert TWO_PROCESSES in (ROOT / "docs" / "scale-out.md").read_text(), (
        "docs/scale-out.md shows another config"
    )
    config, params = tmp_path / "two_processes.yaml", tmp_path / "05.yaml"
    config.write_text(TWO_PROCESSES)
    params.write_text(yaml.safe_dump(_fields(dataset)))
    out = tmp_path / "run" / "05_train"

    done = _accelerate(config, "-m", "lib.stages.train", "--params", params, "--out", out)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed from" not in done.stdout
    _trained_as_one(out, one_process)


def test_a_model_spread_over_the_gpus_is_refused_with_several_processes(
    dataset, tmp_path, monkeypatch
):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    cfg = TrainConfig(**_fields(dataset, model={**TINY, "device_map": "auto"}))
    with pytest.raises(
        ValueError, match="Drop device_map from the model spec to train data-parallel"
    ):
        train(cfg, tmp_path / "dp", progress=False)
    assert not (tmp_path / "dp" / "checkpoint").exists()
