"""Stage 06 over several processes, as researchers launch it: ``torchrun --nproc_per_node 2 -m
lib.evaluate ...`` (on GPUs ``accelerate launch`` starts the same processes; on CPU torchrun gives
them a gloo group, ENVIRONMENT.md). Each rank asks its share of the questions into its own part,
the main rank merges, judges and scores: predictions and metrics equal the single-process run's.
The call cache is emptied between the runs: the ranks really generate."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from lib.prepare import demo_datasets

TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}
TIMING = ("latency_s",)  # a row's wall-clock fields: the only ones that may differ


def _evaluate(params: Path, root: Path, processes: int) -> Path:
    """One evaluation into ``root/<processes>``; the outputs root (the tiny model built once, the
    call cache) is shared, its call cache emptied first."""
    out = root / str(processes) / "06_evaluate"
    for f in (root / "outputs" / "cache").glob("calls.sqlite*"):
        f.unlink()
    env = {**os.environ, "VQALAB_OUTPUTS": str(root / "outputs"), "OMP_NUM_THREADS": "1"}
    module = ["-m", "lib.evaluate", "--params", str(params), "--out", str(out)]
    if processes == 1:
        cmd = [sys.executable, *module]
    else:
        cmd = [str(Path(sys.executable).with_name("torchrun")), "--standalone", f"--nproc_per_node={processes}", *module]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _rows(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_two_processes_give_the_single_process_predictions_and_metrics(tmp_path):
    folders = {k: str(v) for k, v in demo_datasets(tmp_path / "data").items()}
    params = tmp_path / "06.yaml"
    params.write_text(yaml.safe_dump({"datasets": folders, "models": {"tiny": TINY}, "styles": ["zero_shot", "cot"],
                                      "max_new_tokens": 4, "cot_max_new_tokens": 6, "n_resamples": 50,
                                      "tasks": {"yesbut.understanding": {"text_metrics": ["bleu", "rouge_l"]}}}))
    one = _evaluate(params, tmp_path, 1)
    two = _evaluate(params, tmp_path, 2)
    assert _rows(two) == _rows(one)  # the same answers, read and scored the same, in the same order
    pd.testing.assert_frame_equal(pd.read_csv(two / "metrics.csv"), pd.read_csv(one / "metrics.csv"))
    assert not list(two.glob("predictions.rank*.jsonl"))  # the parts are merged away
    assert json.loads((two / "summary.json").read_text())["predictions"] == len(_rows(one))
