"""A stage writes only a folder that is its own (:func:`lib.io.folders.claim_stage`): ``--out`` or a
``run()`` pointed at someone's work is an ``error:`` before anything is written, and stage 07
replaces or removes only the ``comparison/`` and ``agreement/`` it wrote itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lib.compare import changes
from lib.config import cli
from lib.io import folders
from lib.stages import analyze, evaluate


def _work(folder: Path, *subs: str) -> dict:
    """Someone's files in ``folder`` (and in each sub-folder ``subs``); returns them by path."""
    for sub in ("", *subs):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub / "notes.txt").write_text(f"my {sub or 'notes'}\n")
    return _files(folder)


def _files(folder: Path) -> dict:
    return {
        p.relative_to(folder): p.is_file() and p.read_bytes() for p in sorted(folder.rglob("*"))
    }


def test_stage_06_out_a_folder_of_other_work_is_an_error_and_touches_nothing(tmp_path, capsys):
    notes = tmp_path / "notes"
    before = _work(notes)
    assert evaluate.main(["--profile", "smoke", "--out", str(notes)]) == 2
    err = capsys.readouterr().err
    assert f"\nerror: {notes} holds 1 entries not made by this command (notes.txt)" in err
    assert "not a stage 06_evaluate" in err and "Traceback" not in err
    with pytest.raises(folders.NotOurFolder):  # run() as a notebook calls it
        evaluate.run(evaluate.EvalConfig(), notes)
    assert (
        evaluate.main(
            ["shard", "--profile", "smoke", "--shard", "0", "--num-shards", "2"]
            + ["--out", str(notes)]
        )
        == 2
    )
    assert f"\nerror: {notes} holds" in capsys.readouterr().err
    assert _files(notes) == before


def test_a_stage_folder_is_not_another_stages_and_is_marked_as_its_own(tmp_path, capsys):
    out = tmp_path / "mine"
    folders.claim_stage(out, "07_analyze")
    assert evaluate.main(["--profile", "smoke", "--out", str(out)]) == 2
    assert "holds a stage 07_analyze, not a stage 06_evaluate" in capsys.readouterr().err
    assert folders.kind_of(out) == "stage 07_analyze"


def test_another_rank_checking_while_the_main_rank_marks_the_folder_goes_on(tmp_path, monkeypatch):
    """Under torchrun every rank checks the stage folder while the main rank makes and marks it;
    one that looks between the marker's temporary file and its rename sees no stranger's entry (a
    CI run lost its second rank to that window)."""
    out, seen = tmp_path / "06_evaluate", []
    replace = folders.os.replace

    def other_rank_looks_first(src, dst):
        seen.append(sorted(p.name for p in out.iterdir()))
        folders.claim_stage(out, "06_evaluate", write=False)  # rank 1, in the window
        replace(src, dst)

    monkeypatch.setattr(folders.os, "replace", other_rank_looks_first)
    folders.claim_stage(out, "06_evaluate")
    assert seen == [[f"{folders.MARKER}.{os.getpid()}.tmp"]]
    assert folders.kind_of(out) == "stage 06_evaluate"


def test_stage_07_out_never_removes_a_comparison_or_agreement_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "report"  # someone's folder with sub-folders of those names
    before = _work(out, "agreement", "comparison")
    argv = ["--profile", "smoke", "--out", str(out)]
    assert cli.main("python -m lib.stages.analyze", analyze.AnalyzeConfig, analyze.run, argv) == 2
    assert f"\nerror: {out} holds 3 entries" in capsys.readouterr().err
    assert _files(out) == before
    for sub in ("comparison", "agreement"):  # a stage 07 folder of ours, a sub-folder of someone's
        stage = tmp_path / f"stage-{sub}"
        folders.claim_stage(stage, "07_analyze")
        mine = _work(stage, sub)
        with pytest.raises(folders.NotOurFolder, match=f"{stage / sub} holds 1 entries"):
            analyze.run(analyze.AnalyzeConfig(), stage)
        assert _files(stage) == mine


def test_a_comparison_stage_07_wrote_is_its_own_to_replace(tmp_path):
    marked = tmp_path / "marked"
    marked.mkdir()
    folders.mark(marked, changes.KIND)
    (marked / "comparison.json").write_text("{}")
    old = tmp_path / "old"  # written before markers: the comparison's files, nothing else
    old.mkdir()
    for name in ("comparison.json", "causes.csv", "metrics.csv", "config.csv", "items.jsonl"):
        (old / name).write_text("")
    for folder in (marked, old):
        folders.remove_ours(folder, changes.KIND, changes.LEGACY)
        assert not folder.exists()


def test_the_command_line_marks_what_a_stage_wrote_and_creates_nothing_when_it_wrote_nothing(
    tmp_path,
):
    def writes(cfg, out):
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "part.txt").write_text("half")
        raise FileNotFoundError("stopped part way")

    def stops(cfg, out):
        raise FileNotFoundError("an input is missing")

    for run, out in ((writes, tmp_path / "wrote"), (stops, tmp_path / "nothing")):
        argv = ["--profile", "smoke", "--out", str(out)]
        assert cli.main("python -m lib.stages.evaluate", evaluate.EvalConfig, run, argv) == 2
    assert folders.kind_of(tmp_path / "wrote") == "stage 06_evaluate"  # a rerun resumes it
    assert not (tmp_path / "nothing").exists()
