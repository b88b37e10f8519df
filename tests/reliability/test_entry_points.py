"""The newcomer's doors: evaluating the demo's trained model on one's own dataset as the README
shows (``stage:`` paths name the run, and a missing model is a preflight error, not a traceback from
inside generation), what a killed writer of a file leaves beside it, and the item browser opened at
an address naming a dataset the run does not hold."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from lib import io as vio
from lib.config import resolve
from lib.core.paths import ROOT
from lib.io import artifacts
from lib.pages.browser import write_browser
from lib.stages import evaluate
from lib.stages.setup import demo_datasets
from tests.support.chromium import chromium_page

EXAMPLE = ROOT / "examples" / "my_dataset"  # the README's five-item dataset
MINE = {
    "datasets": {"mine": str(EXAMPLE)},
    "models": {"trained": "trained"},
}  # the README's overrides, demo profile


def _evaluate(outputs: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """The README's "Your dataset" command on the demo's trained model, outputs under ``outputs``."""
    env = {**os.environ, "VQALAB_OUTPUTS": str(outputs)}
    argv = [
        sys.executable,
        "-m",
        "lib.stages.evaluate",
        "--profile",
        "demo",
        "--set",
        f"datasets={{mine: {EXAMPLE}}}",
        "--set",
        "models={trained: trained}",
        *extra,
        "--out",
        str(out),
    ]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("run", [None, "other"])
def test_evaluating_the_demo_model_on_ones_own_dataset_names_the_missing_model_and_where_it_looked(
    tmp_path, run
):
    """Without a trained model the command stops before anything runs: ``error:`` naming the model,
    its spec value and the run path it looked at (the run's, from --run or the profile - never a
    folder beside --out), exit 2, no traceback, nothing written where --out points."""
    outputs, out = tmp_path / "outputs", tmp_path / "outputs" / "mine" / artifacts.EVALUATE
    r = _evaluate(outputs, out, *(["--run", run] if run else []))
    looked = outputs / (run or "demo") / artifacts.TRAIN / artifacts.BEST
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    line = next(x for x in r.stderr.splitlines() if x.startswith("error:"))
    assert "'trained'" in line and "stage:05_train/best" in line and str(looked) in line, line
    assert not out.exists()  # the run never started


def test_a_dataset_folder_that_is_not_there_is_an_error_naming_it(tmp_path):
    typo = tmp_path / "typo"
    r = _evaluate(
        tmp_path / "outputs",
        tmp_path / "out" / artifacts.EVALUATE,
        "--set",
        f"datasets={{mine: {typo}}}",
        "--set",
        "models={untrained: student}",
        "--set",
        "demo_data=false",
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert f"error: dataset 'mine': {typo}/items.jsonl not found" in r.stderr


def test_stage_paths_name_the_run_of_the_config_not_the_folder_beside_out(tmp_path, monkeypatch):
    """A folder at the run's ``05_train/best`` is the one used, whatever --out says; a config made
    by hand (no profile, no run) still reads ``stage:`` paths beside its output folder."""
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    best = tmp_path / "outputs" / "demo" / artifacts.TRAIN / artifacts.BEST
    best.mkdir(parents=True)
    (best / "config.json").write_text("{}")
    cfg = resolve(evaluate.EvalConfig, "demo", overrides={**MINE, "demo_data": False}).cfg
    used, data = evaluate.items_to_ask(cfg, tmp_path / "elsewhere" / artifacts.EVALUATE)
    assert used.models["trained"]["name"] == str(best) and set(data) == {"mine"}
    other = resolve(
        evaluate.EvalConfig, "demo", run="other", overrides={**MINE, "demo_data": False}
    ).cfg
    looked = re.escape(str(tmp_path / "outputs" / "other" / artifacts.TRAIN / artifacts.BEST))
    with pytest.raises(
        artifacts.MissingOutputs,
        match=rf"model 'trained' \(name: stage:05_train/best\): folder {looked} ",
    ):
        evaluate.items_to_ask(
            other, best.parent.parent / artifacts.EVALUATE
        )  # the demo run's folder: still run "other"'s model
    by_hand = evaluate.EvalConfig(
        datasets={"mine": str(EXAMPLE)},
        models={"t": {"backend": "hf", "name": "stage:05_train/best"}},
    )
    assert evaluate.items_to_ask(by_hand, best.parent.parent / artifacts.EVALUATE)[0].models["t"][
        "name"
    ] == str(best)


# a writer of one file through atomic_file that stops half way and waits (to be killed); argv: the file
WRITER = """
import sys, time
from lib.io import atomic_file
with atomic_file(sys.argv[1]) as f:
    f.write(b'{"half": '); f.flush()
    print("writing", flush=True)
    time.sleep(120)
"""


def _writer(path: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "writing"
    return proc


def test_a_killed_writers_temporary_file_is_removed_by_the_next_writer_and_a_live_ones_kept(
    tmp_path,
):
    target = tmp_path / artifacts.PREDICTIONS
    vio.write_jsonl(target, [{"id": 1}])
    killed = _writer(target)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    leftover = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert (
        len(leftover) == 1 and str(killed.pid) in leftover[0]
    )  # the kill left it, named with its writer
    live = _writer(target)
    try:
        theirs = [
            p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and str(live.pid) in p.name
        ]
        assert len(theirs) == 1
        vio.write_jsonl(target, [{"id": 2}])
        left = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert left == [theirs[0].name]  # the dead writer's is gone, the live one's kept
    finally:
        live.kill()
        live.wait()
    assert list(vio.read_jsonl(target)) == [{"id": 2}]


@pytest.fixture(scope="module")
def browsed(tmp_path_factory):
    """A run's item browser: the constant baseline on the demo's mcq and vqa sets (no model to load)."""
    root = tmp_path_factory.mktemp("browsed")
    folders = demo_datasets(root / "data")
    cfg = evaluate.EvalConfig(
        datasets={k: str(folders[k]) for k in ("mcq", "vqa")},
        styles=["zero_shot"],
        models={"baseline": {"backend": "constant", "answer": "A"}},
        n_resamples=20,
    )
    evaluate.run(cfg, root / "run" / artifacts.EVALUATE, progress=False)
    return write_browser(root / "run")


@pytest.mark.usefixtures("chromium")
def test_an_unknown_dataset_in_the_browsers_address_is_said_and_the_page_stays_usable(browsed):
    """``#dataset=<what the run does not hold>``: a message naming it (as text, not markup), no
    script error (chromium_page fails on one), and the filters still work."""
    name = "<b>nope</b>"
    with chromium_page() as page:
        page.goto(browsed.as_uri() + "#dataset=" + name)
        expect(page.locator("#problem")).to_have_text(
            f"no dataset named {name} in this run", timeout=30_000
        )
        expect(page.locator("#count")).to_have_text(re.compile(r"^0 answers"), timeout=30_000)
        assert page.locator("#problem b").count() == 0
        page.select_option("#f-dataset", "mcq")
        n = sum(
            1
            for p in vio.read_jsonl(
                browsed.parent.parent / artifacts.EVALUATE / artifacts.PREDICTIONS
            )
            if p["dataset"] == "mcq"
        )
        expect(page.locator("#count")).to_have_text(re.compile(rf"^{n} answers"), timeout=30_000)
        expect(page.locator("#problem")).to_be_hidden()
