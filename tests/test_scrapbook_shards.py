"""Stage 04 in shards, as a Slurm array runs it (``python -m lib.stages.scrapbook shard`` once per
shard, at the same time, then ``merge``): the merged stage folder holds the datasets' bytes a
one-process run writes, and a shard that is missing or made for another config or shard count is
refused by name before anything is written."""

from __future__ import annotations

import json

import pytest
import yaml

from lib.core.paths import RunBusy, RunLock
from lib.families.scrapbook import ScrapbookParamError
from lib.io.folders import claim_stage
from lib.stages import scrapbook
from tests.support.scrapbook import SMALL

# the dataset files a merge must give byte for byte (dataset.json and summary.json say when and from
# what the dataset was made: a merge names its shards there)
SAME = ("items.jsonl", "scenes.jsonl", "counts.csv", "concepts.csv")


def _config(**kw) -> scrapbook.ScrapbookConfig:
    """A small main dataset (24 images) and a further set, as the demo's stage has."""
    return scrapbook.ScrapbookConfig(
        **{**SMALL, "n_preview": 1, "sets": {"fresh": {**SMALL, "seed": 7}}, **kw}
    )


def _files(folder) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_two_shards_and_a_merge_write_the_stage_folder_of_a_one_process_run(tmp_path):
    cfg = _config()
    sharded, one = tmp_path / "sharded" / "04_scrapbook", tmp_path / "one" / "04_scrapbook"
    made = [scrapbook.shard(cfg, sharded, k, 2, progress=False) for k in range(2)]
    assert not (sharded / "datasets").exists()  # a shard writes its own folder only
    merged = scrapbook.merge(cfg, sharded, 2, progress=False)
    single = scrapbook.run(cfg, one, progress=False)
    assert [m["images"] for m in made] == [12, 12] and merged["images"] == single["images"] == 24
    assert json.dumps(merged) == json.dumps(single).replace(str(one), str(sharded))
    for name in ("scrapbook", "fresh"):
        a, b = _files(sharded / "datasets" / name), _files(one / "datasets" / name)
        assert a.keys() == b.keys(), name
        pictures = [f for f in a if f.endswith(".png")]
        assert len(pictures) == 2 * merged["datasets"][name]["images"]  # an image and its mask
        for f in [*SAME, *pictures]:
            assert a[f] == b[f], f"datasets/{name}/{f}"
    # the same files, the shards merged away: figures, summary, provenance, no shards/ left
    assert _files(sharded).keys() == _files(one).keys()
    assert json.loads((sharded / "summary.json").read_text())["questions"] == merged["questions"]


def _refused(cfg, out, num_shards: int) -> str:
    with pytest.raises(ScrapbookParamError) as e:
        scrapbook.merge(cfg, out, num_shards, progress=False)
    assert not (out / "datasets").exists() and not (out / "summary.json").exists()
    return str(e.value)


def test_a_missing_shard_or_one_made_otherwise_is_refused_naming_it(tmp_path):
    out = tmp_path / "04_scrapbook"
    cfg = _config()
    scrapbook.shard(cfg, out, 0, 2, progress=False)
    scrapbook.shard(_config(seed=3), out, 1, 2, progress=False)  # another seed: another dataset
    said = _refused(cfg, out, 2)
    assert f"{out}/shards/1-of-2/datasets/scrapbook: made with other seed than this merge's" in said
    assert "0-of-2" not in said and "shard --shard K --num-shards 2" in said
    said = _refused(cfg, out, 3)  # shards of 2 are not those of 3
    assert all(f"shards/{k}-of-3/datasets/scrapbook: missing" in said for k in range(3))
    (out / "shards" / "1-of-2" / "datasets" / "scrapbook" / "summary.json").unlink()
    said = _refused(cfg, out, 2)
    assert f"{out}/shards/1-of-2/datasets/scrapbook: missing or unfinished" in said
    assert "0-of-2" not in said


def test_a_shard_locks_its_own_folder_not_the_run(tmp_path):
    """The shards of an array run at the same time: each holds its folder's lock, none the run's."""
    out = tmp_path / "04_scrapbook"
    cfg = _config(sets={})
    claim_stage(out, "04_scrapbook")  # as the process making shard 1 did
    with RunLock(scrapbook.shard_folder(out, 1, 2)):  # shard 1 is being made by another process
        with pytest.raises(RunBusy, match="1-of-2"):
            scrapbook.shard(cfg, out, 1, 2, progress=False)
        scrapbook.shard(cfg, out, 0, 2, progress=False)  # its sibling is not held up
    with RunLock(tmp_path):  # the run's lock, as a sibling shard never holds it but merge does
        scrapbook.shard(cfg, out, 1, 2, progress=False)
    assert scrapbook.merge(cfg, out, 2, progress=False)["images"] == 24


def test_the_commands_make_the_runs_shards_and_refuse_a_bad_set_by_name(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    params = tmp_path / "04.yaml"
    params.write_text(yaml.safe_dump({**SMALL, "n_preview": 1}))
    common = ["--params", str(params), "--run", "r"]
    out = tmp_path / "outputs" / "r" / "04_scrapbook"
    with pytest.raises(SystemExit):
        scrapbook.cluster_main(["shard", *common, "--shard", "2", "--num-shards", "2"])
    assert "--shard: 0 to 1 for 2 shards, got 2" in capsys.readouterr().err
    assert scrapbook.cluster_main(["shard", *common, "--shard", "0", "--num-shards", "2"]) == 0
    assert (out / "shards" / "0-of-2" / "datasets" / "scrapbook" / "items.jsonl").exists()
    assert scrapbook.cluster_main(["merge", *common, "--num-shards", "2", "--set", "seed=5"]) == 2
    err = capsys.readouterr().err
    assert "error: " in err and "shards/1-of-2/datasets/scrapbook: missing" in err
    assert "shards/0-of-2/datasets/scrapbook: made with other seed" in err
    assert scrapbook.cluster_main(["shard", *common, "--shard", "1", "--num-shards", "2"]) == 0
    capsys.readouterr()
    assert scrapbook.cluster_main(["merge", *common, "--num-shards", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["images"] == 24
    assert (out / "provenance.json").exists() and not (out / "shards").exists()
    with pytest.raises(SystemExit):  # the two forms of merge are not mixed
        scrapbook.cluster_main(
            ["merge", "--num-shards", "2", "--out", str(tmp_path / "m"), str(out)]
        )
    assert "not both" in capsys.readouterr().err
