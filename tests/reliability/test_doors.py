"""Every door keeps the promises: Scrapbook's ``shard`` and ``merge`` commands and stage 04's
``run()`` check their inputs where they use them, hold the run lock, write only inside their own
output folder, never overwrite a folder of another kind, and name what is wrong with a set of shards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lib.config import ParamsError
from lib.core.paths import ROOT, RunBusy, RunLock
from lib.families.scrapbook import ScrapbookParamError, ScrapbookParams, generate, merge
from lib.io import NotOurFolder
from lib.io.folders import claim_stage
from lib.stages import scrapbook
from lib.stages.setup import demo_datasets
from tests.support.scrapbook import SMALL

# stage 04 on the smoke profile's sizes: a few images, seconds
TINY = dict(
    n_sets=1,
    objects_per_set=3,
    n_backgrounds=1,
    n_arrangements=1,
    n_region_pairs=2,
    n_questions_per_type=1,
    n_preview=1,
)


def _cmd(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lib.stages.scrapbook", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _notes(folder: Path) -> Path:
    """A folder of someone's own work."""
    folder.mkdir(parents=True)
    (folder / "todo.txt").write_text("my notes\n")
    return folder


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> list[Path]:
    """Shards 0 and 1 of a two-shard set (read-only: a test that alters one copies it first)."""
    root = tmp_path_factory.mktemp("shards")
    return [
        generate(ScrapbookParams(**SMALL), root / f"s{i}", shard=i, num_shards=2, progress=False)
        and root / f"s{i}"
        for i in range(2)
    ]


# --- shard and merge never delete what is not theirs -----------------------------------------------


def test_merge_and_shard_refuse_an_out_folder_that_is_not_a_dataset_and_leave_it_whole(
    tmp_path, shards
):
    notes = _notes(tmp_path / "notes")
    merged = _cmd("merge", "--out", str(notes), *map(str, shards))
    assert (
        merged.returncode == 2
        and merged.stderr.startswith("error: ")
        and "Traceback" not in merged.stderr
    )
    assert str(notes) in merged.stderr and "todo.txt" in merged.stderr
    params = tmp_path / "p.yaml"
    params.write_text(json.dumps(SMALL))
    sharded = _cmd(
        "shard", "--params", str(params), "--shard", "0", "--num-shards", "2", "--out", str(notes)
    )
    assert (
        sharded.returncode == 2
        and "error: " in sharded.stderr
        and "Traceback" not in sharded.stderr
    )
    assert [p.name for p in notes.iterdir()] == ["todo.txt"] and (
        notes / "todo.txt"
    ).read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "notes",
        "p.yaml",
    ]  # nothing built beside it either


def test_merge_replaces_its_own_output_and_a_dataset_written_before_markers(tmp_path, shards):
    out = tmp_path / "merged"
    first = merge(shards, out)
    assert merge(shards, out) == first  # its own kind: rewritten
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    for name in (
        "dataset.json",
        "items.jsonl",
        "summary.json",
    ):  # what older code wrote, with no marker
        shutil.copy(out / name, legacy / name)
    assert merge(shards, legacy)["questions"] == first["questions"]
    with pytest.raises(NotOurFolder, match="todo.txt"):
        merge(shards, _notes(tmp_path / "notes"))


def test_merge_and_shard_never_replace_another_dataset_such_as_stage_00s_mcq_set(tmp_path, shards):
    """The rule for unmarked Scrapbook datasets made before markers is exact: a dataset of another
    maker (stage 00's mcq set holds dataset.json and items.jsonl too) is not one."""
    mcq = demo_datasets(tmp_path / "data")["mcq"]
    before = {p.relative_to(mcq): p.read_bytes() for p in mcq.rglob("*") if p.is_file()}
    with pytest.raises(NotOurFolder, match="not a scrapbook dataset"):
        merge(shards, mcq)
    merged = _cmd("merge", "--out", str(mcq), *map(str, shards))
    assert merged.returncode == 2 and merged.stderr.startswith(f"error: {mcq} holds ")
    params = tmp_path / "p.yaml"
    params.write_text(json.dumps(SMALL))
    sharded = _cmd(
        "shard", "--params", str(params), "--shard", "0", "--num-shards", "2", "--out", str(mcq)
    )
    assert sharded.returncode == 2 and "Traceback" not in sharded.stderr
    assert {p.relative_to(mcq): p.read_bytes() for p in mcq.rglob("*") if p.is_file()} == before


def test_an_unmarked_scrapbook_dataset_with_anything_else_in_it_is_not_replaced(tmp_path, shards):
    out = tmp_path / "merged"
    merge(shards, out)
    (out / ".vqalab.json").unlink()  # as made before markers
    (out / "notes.txt").write_text("mine")
    with pytest.raises(NotOurFolder, match="9 entries not made by this command"):
        merge(shards, out)
    (out / "notes.txt").unlink()
    info = json.loads((out / "dataset.json").read_text())
    (out / "dataset.json").write_text(json.dumps({**info, "name": "my-set"}))
    with pytest.raises(NotOurFolder):  # made by someone else, though its files are Scrapbook's
        merge(shards, out)
    assert (out / "dataset.json").read_text() == json.dumps({**info, "name": "my-set"})


# --- stage 04's run() checks where it uses -------------------------------------------------------


def test_run_refuses_a_config_edited_into_a_set_outside_its_folder_and_touches_nothing(tmp_path):
    elsewhere = _notes(tmp_path / "elsewhere")
    out = tmp_path / "run" / "04_scrapbook"
    cfg = scrapbook.ScrapbookConfig(**TINY)
    cfg.sets = {"../../../elsewhere": {}}  # a notebook cell, after the config was made and checked
    with pytest.raises(
        ParamsError, match=r"sets: '\.\./\.\./\.\./elsewhere' is not a dataset name"
    ):
        scrapbook.run(cfg, out, progress=False)
    with pytest.raises(ParamsError, match="is not a dataset name"):
        scrapbook.further_sets(cfg, out, progress=False)  # the step the notebook calls checks too
    cfg = scrapbook.ScrapbookConfig(**TINY)
    cfg.n_sets = "2"
    with pytest.raises(ParamsError, match="n_sets"):
        scrapbook.run(cfg, out, progress=False)
    assert [p.name for p in elsewhere.iterdir()] == ["todo.txt"] and not out.exists()


def test_run_never_writes_through_a_link_out_of_its_folder(tmp_path):
    elsewhere = _notes(tmp_path / "elsewhere")
    out = tmp_path / "run" / "04_scrapbook"
    claim_stage(out, "04_scrapbook")  # the stage's own folder, its datasets/ a link out of it
    (out / "datasets").symlink_to(elsewhere, target_is_directory=True)
    cfg = scrapbook.ScrapbookConfig(**TINY, sets={"train": {}})
    with pytest.raises(ParamsError, match=r"datasets/scrapbook.*outside"):
        scrapbook.run(cfg, out, progress=False)
    with pytest.raises(ParamsError, match=r"datasets/train.*outside"):
        scrapbook.further_sets(cfg, out, progress=False)
    assert [p.name for p in elsewhere.iterdir()] == ["todo.txt"]


def test_a_stage_run_refuses_a_dataset_folder_of_another_kind(tmp_path):
    out = tmp_path / "run" / "04_scrapbook"
    notes = _notes(out / "datasets" / "train")
    with pytest.raises(NotOurFolder, match="todo.txt"):
        scrapbook.further_sets(
            scrapbook.ScrapbookConfig(**TINY, sets={"train": {}}), out, progress=False
        )
    assert [p.name for p in notes.iterdir()] == ["todo.txt"]


# --- run() holds the run lock --------------------------------------------------------------------

HOLD = """
import sys, time
from lib.core.paths import RunLock
with RunLock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_run_is_refused_while_another_process_holds_the_run(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunBusy, match=f"PID {holder.pid}"):
            scrapbook.run(scrapbook.ScrapbookConfig(**TINY), run / "04_scrapbook", progress=False)
        assert not (run / "04_scrapbook").exists()
    finally:
        holder.communicate("", timeout=60)


# run() in a child of a process that holds the run, as the pipeline's notebook kernels are
CHILD = """
import sys
from lib.stages import scrapbook as S
from lib.stages.setup import demo_datasets
S.run(S.ScrapbookConfig(n_sets=1, objects_per_set=3, n_backgrounds=1, n_arrangements=1, n_region_pairs=2,
                        n_questions_per_type=1, n_preview=1), sys.argv[1], progress=False)
print("ran", flush=True)
"""


def test_run_joins_the_lock_its_own_process_or_the_process_above_it_holds(tmp_path, monkeypatch):
    run = tmp_path / "run"
    with RunLock(run):  # a caller (a script, a launcher) that holds the run itself, in this process
        assert (
            scrapbook.run(scrapbook.ScrapbookConfig(**TINY), run / "04_scrapbook", progress=False)[
                "images"
            ]
            > 0
        )
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(run / "04b")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert child.returncode == 0 and "ran" in child.stdout, child.stderr
        # a process that merely claims the holder is its parent is refused
        forged = subprocess.run(
            [sys.executable, "-c", CHILD, str(run / "04c")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "VQALAB_RUN_LOCKS": json.dumps({str(run / ".lock"): 1})},
        )
        assert forged.returncode != 0 and "RunBusy" in forged.stderr and not (run / "04c").exists()
    with RunLock(run):
        pass  # released whole: the joins did not keep it


def test_only_the_main_rank_of_a_job_takes_the_lock(tmp_path, monkeypatch):
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"  # rank 0 of the job, say
        monkeypatch.setenv("RANK", "1")
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert (
            scrapbook.run(scrapbook.ScrapbookConfig(**TINY), run / "04_scrapbook", progress=False)[
                "images"
            ]
            > 0
        )
    finally:
        holder.communicate("", timeout=60)


def test_the_command_line_runs_the_stage_under_the_run_lock(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text(json.dumps(TINY))
    done = _cmd("--params", str(params), "--out", str(tmp_path / "run" / "04_scrapbook"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run" / "04_scrapbook" / "summary.json").exists() and (
        tmp_path / "run" / ".lock"
    ).exists()


# --- a set of shards says what is wrong with it --------------------------------------------------


def test_a_shard_relabelled_in_its_summary_is_refused(tmp_path, shards):
    copy = tmp_path / "s0_as_1"
    shutil.copytree(shards[0], copy)
    summary = json.loads((copy / "summary.json").read_text())
    (copy / "summary.json").write_text(json.dumps({**summary, "shard": 1}))
    with pytest.raises(
        ScrapbookParamError,
        match=rf"{copy}/scenes\.jsonl: line 1 is unit .* belongs to shard 0, but .* shard 1 of 2",
    ):
        merge([shards[0], copy], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_an_image_linked_to_outside_a_shard_is_refused_naming_it(tmp_path, shards):
    copy = tmp_path / "s1"
    shutil.copytree(shards[1], copy)
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"not yours")
    image = sorted((copy / "images").iterdir())[0]
    image.unlink()
    image.symlink_to(secret)
    with pytest.raises(ScrapbookParamError, match=rf"{image}: .*link"):
        merge([shards[0], copy], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_a_wrong_shard_count_is_named_not_reported_as_given_twice(tmp_path, shards):
    three = [
        generate(
            ScrapbookParams(**SMALL), tmp_path / f"t{i}", shard=i, num_shards=3, progress=False
        )
        and tmp_path / f"t{i}"
        for i in range(2)
    ]
    with pytest.raises(ScrapbookParamError, match=r"shard\(s\) 2 missing") as e:
        merge(three, tmp_path / "merged")
    assert "twice" not in str(e.value)
    with pytest.raises(
        ScrapbookParamError, match=rf"{three[0]} is shard 0 of 3 .* {shards[0]} is shard 0 of 2"
    ) as e:
        merge([shards[0], shards[1], three[0]], tmp_path / "merged")
    assert "twice" not in str(e.value)
    with pytest.raises(ScrapbookParamError, match="given twice"):
        merge([shards[0], shards[1], shards[1]], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
