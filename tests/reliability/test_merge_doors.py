"""Merges are all or nothing (stage 06's parts, stage 04's shards): a ``part.json`` or shard
summary that is not what a shard writes is an ``error:`` naming the file and the field before
anything is written; the parts are removed only once the summary is written, so a merge that fails
can be run again; ``shards/`` may be a link (to a scratch disk); a part whose shard still holds its
lock is refused, not deleted; and each part's rows must be the questions (units) its shard asks, in
its order, since the merge interleaves the parts by that order."""

from __future__ import annotations

import json

import pytest
import yaml

from lib.core.paths import RunLock
from lib.core.ranks import Ranks
from lib.eval.ask import PartRefused, shard_folder
from lib.families.scrapbook import ScrapbookParamError
from lib.io import file_sha256
from lib.io.folders import claim_stage
from lib.models.store import CallStore
from lib.stages import evaluate, scrapbook
from lib.stages.setup import demo_datasets
from tests.support.scrapbook import SMALL

YES = {"backend": "constant", "answer": "yes"}


@pytest.fixture(scope="module")
def mcq(tmp_path_factory) -> str:
    return str(demo_datasets(tmp_path_factory.mktemp("data"))["mcq"])


@pytest.fixture
def sharded(mcq, tmp_path) -> tuple[list[str], object]:
    """Stage 06's command-line arguments for a folder and the parts of its 2 shards, made there."""
    params = tmp_path / "06.yaml"
    values = {"datasets": {"mcq": mcq}, "models": {"yes": YES}, "styles": ["zero_shot"]}
    params.write_text(yaml.safe_dump({**values, "n_resamples": 20}))
    out = tmp_path / "06_evaluate"
    common = ["--params", str(params), "--out", str(out)]
    for k in range(2):
        assert evaluate.main(["shard", *common, "--shard", str(k), "--num-shards", "2"]) == 0
    return common, out


def _info(out, k: int = 1):
    return shard_folder(out, Ranks(k, 2)) / "part.json"


def _refused_by_cli(common, out, capsys) -> str:
    """The merge command's error (exit code 2, no traceback), with nothing written and every part
    still there to merge again."""
    capsys.readouterr()
    assert evaluate.main(["merge", *common, "--num-shards", "2"]) == 2
    err = capsys.readouterr().err
    assert "\nerror: " in err and "Traceback" not in err
    for name in ("predictions.jsonl", "manifest.json", "metrics.csv", "summary.json"):
        assert not (out / name).exists(), name
    assert all((shard_folder(out, Ranks(k, 2)) / "predictions.jsonl").exists() for k in range(2))
    return err


def _merges(common, out) -> None:
    assert evaluate.main(["merge", *common, "--num-shards", "2"]) == 0
    assert (out / "metrics.csv").exists() and (out / "summary.json").exists()


def test_a_part_json_that_is_no_object_is_an_error_naming_it(sharded, capsys):
    common, out = sharded
    kept = _info(out).read_text()
    _info(out).write_text("[]")
    err = _refused_by_cli(common, out, capsys)
    assert f"{_info(out)}: not a JSON object but list" in err and "0-of-2" not in err
    _info(out).write_text(kept)
    _merges(common, out)


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("seconds", None, "field 'seconds' missing"),
        ("rows", None, "field 'rows' missing"),
        ("rows", "3", "field 'rows': expected int, got str"),
        ("shard", True, "field 'shard': expected int, got bool"),
        ("datasets", [], "field 'datasets': expected dict, got list"),
    ],
)
def test_a_part_json_missing_a_field_or_of_another_type_is_refused_first(
    sharded, capsys, field, value, said
):
    common, out = sharded
    kept = _info(out).read_text()
    info = json.loads(kept)
    info.pop(field) if value is None else info.update({field: value})
    _info(out).write_text(json.dumps(info))
    assert f"{_info(out)}: {said}" in _refused_by_cli(common, out, capsys)
    _info(out).write_text(kept)
    _merges(common, out)


def test_the_parts_stay_until_the_summary_is_written(sharded, capsys, monkeypatch):
    """A merge that fails after the predictions (here: while scoring) can be run again."""
    common, out = sharded

    def failing(*args, **kwargs):
        raise FileNotFoundError("scoring stopped")

    monkeypatch.setattr(evaluate, "rescore_folder", failing)
    assert evaluate.main(["merge", *common, "--num-shards", "2"]) == 2
    assert "scoring stopped" in capsys.readouterr().err
    assert all(_info(out, k).exists() for k in range(2))
    monkeypatch.undo()
    _merges(common, out)
    assert not (out / "shards").exists()


def test_a_shards_folder_that_is_a_link_merges_and_stays(mcq, tmp_path, monkeypatch):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    out, scratch = tmp_path / "outputs" / "r" / "06_evaluate", tmp_path / "scratch" / "parts"
    out.mkdir(parents=True)
    scratch.mkdir(parents=True)
    (out / "shards").symlink_to(scratch)  # as people put the parts on a cluster's scratch disk
    params = tmp_path / "06.yaml"
    values = {"datasets": {"mcq": mcq}, "models": {"yes": YES}, "styles": ["zero_shot"]}
    params.write_text(yaml.safe_dump({**values, "n_resamples": 20}))
    common = ["--params", str(params), "--run", "r"]
    for k in range(2):
        assert evaluate.main(["shard", *common, "--shard", str(k), "--num-shards", "2"]) == 0
    assert sorted(p.name for p in scratch.iterdir()) == ["0-of-2", "1-of-2"]
    _merges(common, out)
    assert (out / "shards").is_symlink() and not any(scratch.iterdir())  # the user's link stays


def test_a_part_whose_shard_holds_its_lock_is_refused_not_deleted(sharded, capsys):
    common, out = sharded
    with RunLock(shard_folder(out, Ranks(1, 2))):  # shard 1 is being written again, elsewhere
        err = _refused_by_cli(common, out, capsys)
    assert f"error: {shard_folder(out, Ranks(1, 2))}: shard 1 of 2 is still writing" in err
    assert "0-of-2" not in err
    _merges(common, out)


def _rewrite(part, lines: list[str]) -> None:
    """``part`` holding ``lines``, its ``part.json`` made to say so (as a careless repair would)."""
    part.write_text("".join(lines))
    info_path = part.parent / "part.json"
    info = json.loads(info_path.read_text())
    info.update(rows=len(lines), sha256=file_sha256(part, remember=False))
    info_path.write_text(json.dumps(info))


def test_a_part_whose_rows_are_not_its_shards_in_order_is_refused(mcq, tmp_path):
    out = tmp_path / "06_evaluate"
    cfg = evaluate.EvalConfig(datasets={"mcq": mcq}, models={"yes": YES}, n_resamples=20)
    store = CallStore(tmp_path / "calls.sqlite")
    for k in range(2):
        evaluate.shard(cfg, out, Ranks(k, 2), store, progress=False)
    part = shard_folder(out, Ranks(0, 2)) / "predictions.jsonl"
    other = shard_folder(out, Ranks(1, 2)) / "predictions.jsonl"
    lines, theirs = part.read_text().splitlines(True), other.read_text().splitlines(True)
    for changed, said in [
        ([lines[1], lines[0], *lines[2:]], "line 1 is item"),  # two rows swapped
        ([*lines[:-1]], f"ends after {len(lines) - 1} rows"),  # the last row lost
        ([*lines, theirs[0]], f"line {len(lines) + 1} is item"),  # another shard's row
        ([lines[0], "[1]\n", *lines[2:]], "line 2 is not a prediction row"),
    ]:
        _rewrite(part, changed)
        with pytest.raises(PartRefused) as e:
            evaluate.merge(cfg, out, 2, store, progress=False)
        assert f"{part}: {said}" in str(e.value) and "1-of-2" not in str(e.value), said
        assert not (out / "predictions.jsonl").exists()
    _rewrite(part, lines)
    assert evaluate.merge(cfg, out, 2, store, progress=False)["predictions"] > 0


# Stage 04: the same doors for the shards of the main Scrapbook dataset


def _scrapbook_shards(out, num_shards: int = 2) -> scrapbook.ScrapbookConfig:
    cfg = scrapbook.ScrapbookConfig(**SMALL, n_preview=1)
    for k in range(num_shards):
        scrapbook.shard(cfg, out, k, num_shards, progress=False)
    return cfg


def _scrapbook_refused(cfg, out) -> str:
    with pytest.raises(ScrapbookParamError) as e:
        scrapbook.merge(cfg, out, 2, progress=False)
    # nothing written: no dataset (a merge builds it aside, then swaps it in), no summary
    assert not (out / "datasets" / "scrapbook").exists() and not (out / "summary.json").exists()
    assert all(
        (scrapbook.shard_folder(out, k, 2) / "datasets" / "scrapbook").is_dir() for k in range(2)
    )
    return str(e.value)


def test_scrapbook_shards_in_a_linked_folder_merge_and_the_link_stays(tmp_path):
    out, scratch = tmp_path / "04_scrapbook", tmp_path / "scratch" / "shards"
    claim_stage(out, "04_scrapbook")  # the stage's folder, its shards/ a link to a scratch disk
    scratch.mkdir(parents=True)
    (out / "shards").symlink_to(scratch)
    cfg = _scrapbook_shards(out)
    assert scrapbook.merge(cfg, out, 2, progress=False)["images"] == 24
    assert (out / "summary.json").exists() and (out / "shards").is_symlink()
    assert not any(scratch.iterdir())


def test_a_scrapbook_shard_whose_lock_is_held_is_refused_not_deleted(tmp_path):
    out = tmp_path / "04_scrapbook"
    cfg = _scrapbook_shards(out)
    with RunLock(scrapbook.shard_folder(out, 1, 2)):  # shard 1 is being made again, elsewhere
        said = _scrapbook_refused(cfg, out)
    assert f"{scrapbook.shard_folder(out, 1, 2)}: shard 1 of 2 is still being made" in said
    assert "0-of-2" not in said
    assert scrapbook.merge(cfg, out, 2, progress=False)["images"] == 24


def test_a_scrapbook_shard_whose_units_are_out_of_order_is_refused(tmp_path):
    out = tmp_path / "04_scrapbook"
    cfg = _scrapbook_shards(out)
    scenes = scrapbook.shard_folder(out, 0, 2) / "datasets" / "scrapbook" / "scenes.jsonl"
    lines = scenes.read_text().splitlines(True)
    kept = "".join(lines)
    scenes.write_text("".join([*lines[-1:], *lines[:-1]]))  # its last unit's image put first
    said = _scrapbook_refused(cfg, out)
    assert f"{scenes}: line 2 is unit" in said and "comes before" in said
    scenes.write_text(kept)
    assert scrapbook.merge(cfg, out, 2, progress=False)["images"] == 24


def test_a_scrapbook_shard_summary_without_a_field_is_an_error_naming_it(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    params = tmp_path / "04.yaml"
    params.write_text(yaml.safe_dump({**SMALL, "n_preview": 1}))
    common = ["--params", str(params), "--run", "r"]
    for k in range(2):
        assert (
            scrapbook.cluster_main(["shard", *common, "--shard", str(k), "--num-shards", "2"]) == 0
        )
    out = tmp_path / "outputs" / "r" / "04_scrapbook"
    summary = scrapbook.shard_folder(out, 1, 2) / "datasets" / "scrapbook" / "summary.json"
    kept = summary.read_text()
    summary.write_text(json.dumps({k: v for k, v in json.loads(kept).items() if k != "units"}))
    capsys.readouterr()
    assert scrapbook.cluster_main(["merge", *common, "--num-shards", "2"]) == 2
    err = capsys.readouterr().err
    assert "\nerror: merge: " in err and f"{summary}: field 'units' missing" in err
    assert "Traceback" not in err and not (out / "datasets" / "scrapbook").exists()
    summary.write_text(kept)
    assert scrapbook.cluster_main(["merge", *common, "--num-shards", "2"]) == 0
