"""The comparison trusts no more than a rescore does: ``python -m lib.compare`` and stage 07's
``compare_with`` verify both evaluation folders with the check stage 06's rescore makes
(:func:`lib.eval.manifest.check_manifest`) - a run killed part way, replies or scores edited after
the run finished are refused with the folder named and what to do; a dataset rewritten in place
between the two runs is a cause of its own (``dataset``), never put on the model."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lib.compare import explain as compare
from lib.compare import runs
from lib.core.paths import ROOT
from lib.io import kind_of, load_items, save_dataset
from lib.models.store import CallStore
from lib.stages import analyze, evaluate
from lib.stages.setup import demo_datasets

# the random baseline's reply follows its request; the constant one's does not
MODELS = {"r": {"backend": "random", "seed": 0}, "yes": {"backend": "constant", "answer": "Yes."}}

# A rerun of stage 06 over a finished run, stopped at its first new call until it is killed (argv:
# datasets folder, evaluation folder, a file made once the rerun is under way).
STUCK = """
import sys, time
from dataclasses import replace
from pathlib import Path
from lib.models.baseline import ConstantModel
from lib.stages import evaluate as E
folder, out, started = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
def stuck(self, request):
    started.touch()
    time.sleep(600)
ConstantModel.answer = stuck
cfg = E.EvalConfig(datasets={"mcq": f"{folder}/mcq", "vqa": f"{folder}/vqa"}, styles=["zero_shot"],
                   models={"yes": {"backend": "constant", "answer": "No."}}, n_resamples=20)
E.run(cfg, out, progress=False)
"""


def _evaluate(data: Path, out: Path, store: CallStore) -> Path:
    cfg = evaluate.EvalConfig(
        datasets={"mcq": str(data / "mcq"), "vqa": str(data / "vqa")},
        models=MODELS,
        styles=["zero_shot"],
        n_resamples=20,
    )
    evaluate.run(cfg, out, store=store, progress=False)
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """One finished stage 06 run (its evaluation folder) on the demo's mcq and vqa sets."""
    root = tmp_path_factory.mktemp("finished")
    demo_datasets(root / "data")
    return _evaluate(root / "data", root / "run" / "06_evaluate", CallStore(root / "calls.sqlite"))


def _copy(folder: Path, to: Path) -> Path:
    shutil.copytree(folder, to / "06_evaluate")
    return to / "06_evaluate"


def _edit_rows(folder: Path, change) -> None:
    """``change(row)`` applied to every line of the folder's predictions.jsonl, written back."""
    path = folder / "predictions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(change(r)) + "\n" for r in rows))


def _reorder(folder: Path) -> None:
    """The dataset rewritten in place as a regenerated set would be: every item's options reversed."""
    items = [
        replace(it, options=it.options[::-1], answer=[len(it.options) - 1 - k for k in it.answer])
        for it in load_items(folder)
    ]
    save_dataset(folder, items, json.loads((folder / "dataset.json").read_text()))


def _refused(a: Path, b: Path, capsys, *words: str) -> str:
    """``python -m lib.compare a b`` (in process) exits 2 with one ``error:`` line holding ``words``."""
    assert runs.main([str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    for word in words:
        assert word in err, (word, err)
    return err


def test_two_finished_runs_compare_as_before(finished, tmp_path, capsys):
    other = _copy(finished, tmp_path / "other")
    assert runs.main([str(finished), str(other)]) == 0
    assert "changed items: 0" in capsys.readouterr().out


def test_a_run_is_never_compared_with_itself_by_the_command_nor_by_stage_07(
    finished, tmp_path, capsys
):
    link = tmp_path / "link"
    link.symlink_to(finished)
    _refused(finished, link, capsys, "runs A and B are one folder", str(finished))
    _refused(finished.parent, finished, capsys, "runs A and B are one folder")  # a run folder
    stage_07 = analyze.AnalyzeConfig(compare_with=str(link))  # this run's own evaluation
    with pytest.raises(compare.CompareError, match=r"compare_with .*: runs A and B are one folder"):
        analyze.comparison(stage_07, finished.parent / "07_analyze")


def test_a_stage_06_run_marks_its_folder_as_its_own(finished):
    assert kind_of(finished) == "stage 06_evaluate"


def test_a_run_killed_part_way_is_refused_by_the_command_and_by_stage_07(finished, tmp_path):
    killed = _copy(finished, tmp_path / "killed")
    started = tmp_path / "started"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            STUCK,
            str(Path(finished).parents[1] / "data"),
            str(killed),
            str(started),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not started.exists():
        assert child.poll() is None, child.stderr.read()
        assert time.monotonic() < deadline, "the rerun never started asking"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert (killed / "predictions.jsonl").exists() and not (killed / "manifest.json").exists()
    done = subprocess.run(
        [sys.executable, "-m", "lib.compare", str(finished), str(killed)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        done.returncode == 2
        and done.stderr.startswith("error: ")
        and "Traceback" not in done.stderr
    )
    assert (
        str(killed) in done.stderr
        and "did not finish" in done.stderr
        and "rerun stage 06" in done.stderr
    )
    stage_07 = analyze.AnalyzeConfig(compare_with=str(killed))
    with pytest.raises(
        compare.CompareError, match=r"compare_with .*did not finish.*rerun stage 06"
    ) as refused:
        analyze.comparison(stage_07, finished.parent / "07_analyze")
    said = done.stderr.removeprefix("error: ").strip()
    assert str(refused.value).endswith(said)
    with pytest.raises(
        ValueError
    ) as rescore:  # the check stage 06's rescore makes, in the same words
        evaluate.rescore_folder(killed)
    assert str(rescore.value).startswith(said.removeprefix("cannot compare "))


def test_scores_edited_after_the_run_finished_are_refused_not_put_on_the_metric_version(
    finished, tmp_path, capsys
):
    edited = _copy(finished, tmp_path / "edited")
    _edit_rows(
        edited,
        lambda r: (
            {**r, "scores": {k: 1.0 - v for k, v in r["scores"].items()}}
            if r["dataset"] == "mcq"
            else r
        ),
    )
    err = _refused(finished, edited, capsys, str(edited), "scores", "rescore")
    assert "metric version" not in err


def test_replies_edited_after_the_run_finished_are_refused(finished, tmp_path, capsys):
    edited = _copy(finished, tmp_path / "edited")
    _edit_rows(edited, lambda r: {**r, "raw": "Maybe."} if r["model"] == "yes" else r)
    _refused(
        edited,
        finished,
        capsys,
        str(edited),
        "answers changed after the evaluation finished",
        "rerun stage 06",
    )
    evaluate.rescore_folder(
        edited, unverified=True
    )  # its tables now agree with the edited replies: still not the run's
    _refused(edited, finished, capsys, str(edited), "answers changed after the evaluation finished")


def test_judgements_or_config_edited_after_the_run_finished_are_refused(finished, tmp_path, capsys):
    for name in ("judgements.jsonl", "config.json"):
        edited = _copy(finished, tmp_path / name)
        with (edited / name).open("a") as f:
            f.write("\n")
        _refused(finished, edited, capsys, str(edited), name)


def test_a_dataset_rewritten_in_place_between_the_runs_is_its_own_cause_not_the_model(
    tmp_path, capsys
):
    data, store = tmp_path / "data", CallStore(tmp_path / "calls.sqlite")
    demo_datasets(data)
    run_a = _evaluate(data, tmp_path / "a" / "06_evaluate", store)
    _reorder(data / "mcq")
    run_b = _evaluate(data, tmp_path / "b" / "06_evaluate", store)
    result = compare.compare(run_a, run_b)
    assert result["changed"] > 0 and result["causes"]["model"]["items"] == 0
    assert {(it["dataset"], it["cause"]) for it in result["items"]} == {("mcq", "dataset")}
    assert result["causes"]["dataset"]["because"] == {
        "dataset 'mcq' changed since run A": result["changed"]
    }
    for m in result["metrics"]:
        assert sum(m["by_cause"].values()) == pytest.approx(m["difference"], abs=1e-12)
    assert runs.main([str(run_a), str(run_b)]) == 0
    assert "dataset 'mcq' changed since run A" in capsys.readouterr().out
    # both runs asked the same version, rewritten since: what they were asked cannot be rebuilt
    _reorder(data / "mcq")  # back to run A's order, which run B did not answer
    _refused(
        run_b,
        _copy(run_b, tmp_path / "b2"),
        capsys,
        "dataset 'mcq'",
        f"{data / 'mcq'}",
        "changed since both",
    )
