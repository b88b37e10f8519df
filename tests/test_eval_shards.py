"""Stage 06 in shards, as a Slurm array runs it (``python -m lib.stages.evaluate shard`` once per
shard, at the same time, then ``merge``): the merged predictions, judgements and tables are the bytes
a one-process run writes, and a part that is missing, made for another config or shard count, or
changed since, is refused by name before anything is written."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from lib.core.paths import RunBusy, RunLock
from lib.core.ranks import Ranks
from lib.eval.ask import PartRefused, shard_folder
from lib.io.folders import claim_stage
from lib.models.store import CallStore
from lib.stages import evaluate
from lib.stages.setup import demo_datasets

from .support.openai_server import OpenAIStub

TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8}
YES = {"backend": "constant", "answer": "yes"}
COMPARED = ("predictions.jsonl", "judgements.jsonl", "metrics.csv", "levels.csv", "errors.csv")


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, str]:
    return {k: str(v) for k, v in demo_datasets(tmp_path_factory.mktemp("data")).items()}


def _config(datasets: dict, **kw) -> evaluate.EvalConfig:
    base = dict(
        datasets=datasets,
        models={"tiny": TINY},
        styles=["zero_shot", "cot"],
        max_new_tokens=4,
        cot_max_new_tokens=6,
        max_items=12,
        n_resamples=50,
        tasks={"yesbut.understanding": {"text_metrics": ["bleu", "rouge_l"]}},
    )
    return evaluate.EvalConfig(**{**base, **kw})


@pytest.mark.slow
def test_two_shards_and_a_merge_write_the_bytes_of_a_one_process_run(datasets, tmp_path):
    """The shards ask their shares into a fresh call store (so they really generate); the
    one-process run then reads every answer from it, so even the latencies are the same bytes."""
    store = CallStore(tmp_path / "calls.sqlite")
    with OpenAIStub() as server:
        os.environ["VQALAB_JUDGE_KEY"] = "sk-test"
        judge = {"backend": "openai", "name": "judge", "base_url": server.url}
        cfg = _config(datasets, judge={**judge, "api_key_env": "VQALAB_JUDGE_KEY"})
        sharded, one = tmp_path / "sharded" / "06_evaluate", tmp_path / "one" / "06_evaluate"
        parts = [evaluate.shard(cfg, sharded, Ranks(k, 2), store, progress=False) for k in range(2)]
        assert len(store) > 0 and not (sharded / "predictions.jsonl").exists()
        merged = evaluate.merge(cfg, sharded, 2, store, progress=False)
        asked = len(store)
        single = evaluate.run(cfg, one, store, progress=False)
    assert len(store) == asked  # the one-process run asked nothing the shards had not
    assert all(p["rows"] > 0 for p in parts) and abs(parts[0]["rows"] - parts[1]["rows"]) <= 9
    assert merged["predictions"] == single["predictions"] == sum(p["rows"] for p in parts)
    assert merged["judgements"] == single["judgements"] > 0
    for name in COMPARED:
        assert (sharded / name).read_bytes() == (one / name).read_bytes(), name
    assert json.loads((sharded / "manifest.json").read_text()) == json.loads(
        (one / "manifest.json").read_text()
    )
    assert not (sharded / "shards").exists()  # the parts are merged away
    assert (
        json.loads((sharded / "summary.json").read_text())["predictions"] == merged["predictions"]
    )


def _yes(datasets: dict, **kw) -> evaluate.EvalConfig:
    """A quick config: one dataset, a model that answers "yes"."""
    return evaluate.EvalConfig(
        datasets={"mcq": datasets["mcq"]},
        models={"yes": YES},
        styles=["zero_shot"],
        n_resamples=20,
        **kw,
    )


def _parts(datasets: dict, out, num_shards: int, **kw) -> evaluate.EvalConfig:
    """The config of :func:`_yes` and the parts of ``num_shards`` shards made with it in ``out``."""
    cfg = _yes(datasets, **kw)
    store = CallStore(out.parent / "calls.sqlite")
    for k in range(num_shards):
        evaluate.shard(cfg, out, Ranks(k, num_shards), store, progress=False)
    return cfg


def _refused(cfg, out, num_shards: int) -> str:
    with pytest.raises(PartRefused) as e:
        evaluate.merge(cfg, out, num_shards, CallStore(out.parent / "calls.sqlite"), progress=False)
    assert not (out / "predictions.jsonl").exists() and not (out / "manifest.json").exists()
    return str(e.value)


def test_a_missing_part_is_refused_naming_it(datasets, tmp_path):
    out = tmp_path / "06_evaluate"
    cfg = _parts(datasets, out, 2)
    (shard_folder(out, Ranks(1, 2)) / "part.json").unlink()  # as a shard stopped part way leaves it
    said = _refused(cfg, out, 2)
    assert f"{out}/shards/1-of-2/predictions.jsonl: missing or unfinished" in said
    assert "0-of-2" not in said and "shard --shard K --num-shards 2" in said
    said = _refused(cfg, out, 3)  # parts of 2 shards are not those of 3
    assert all(f"shards/{k}-of-3/predictions.jsonl: missing" in said for k in range(3))


def test_a_part_made_for_another_config_is_refused_naming_it(datasets, tmp_path):
    out = tmp_path / "06_evaluate"
    _parts(datasets, out, 2, seed=1)
    cfg = _yes(datasets)  # the same config but for its seed
    said = _refused(cfg, out, 2)
    assert f"{out}/shards/0-of-2/predictions.jsonl: made for another config" in said
    assert "shards/1-of-2/predictions.jsonl: made for another config" in said


def test_a_part_changed_after_it_was_written_is_refused_naming_it(datasets, tmp_path):
    out = tmp_path / "06_evaluate"
    cfg = _parts(datasets, out, 2)
    part = shard_folder(out, Ranks(0, 2)) / "predictions.jsonl"
    part.write_text(part.read_text().replace('"yes"', '"no"', 1))
    said = _refused(cfg, out, 2)
    assert f"{part}: not the part its part.json describes" in said and "1-of-2" not in said


def test_a_shard_locks_its_own_part_not_the_run(datasets, tmp_path):
    """The shards of an array run at the same time: each holds its part's lock, none the run's."""
    out = tmp_path / "06_evaluate"
    cfg = _yes(datasets)
    store = CallStore(tmp_path / "calls.sqlite")
    claim_stage(out, "06_evaluate")  # as the process writing shard 1 did
    with RunLock(shard_folder(out, Ranks(1, 2))):  # shard 1 is being written by another process
        with pytest.raises(RunBusy, match="1-of-2"):
            evaluate.shard(cfg, out, Ranks(1, 2), store, progress=False)
        evaluate.shard(cfg, out, Ranks(0, 2), store, progress=False)  # its sibling is not held up
    with RunLock(tmp_path):  # the run's lock, as a sibling shard never holds it but merge does
        evaluate.shard(cfg, out, Ranks(1, 2), store, progress=False)
    assert evaluate.merge(cfg, out, 2, store, progress=False)["predictions"] > 0


def test_the_commands_refuse_a_shard_out_of_range_and_name_a_refused_part(
    datasets, tmp_path, capsys
):
    out = tmp_path / "06_evaluate"
    params = tmp_path / "06.yaml"
    values = {"datasets": {"mcq": datasets["mcq"]}, "models": {"yes": YES}, "styles": ["zero_shot"]}
    params.write_text(yaml.safe_dump({**values, "n_resamples": 20}))
    common = ["--params", str(params), "--out", str(out)]
    with pytest.raises(SystemExit):
        evaluate.main(["shard", *common, "--shard", "2", "--num-shards", "2"])
    assert "--shard: 0 to 1 for 2 shards, got 2" in capsys.readouterr().err
    assert evaluate.main(["shard", *common, "--shard", "0", "--num-shards", "2"]) == 0
    assert evaluate.main(["merge", *common, "--num-shards", "2", "--set", "seed=5"]) == 2
    err = capsys.readouterr().err
    assert "error: " in err and "shards/1-of-2/predictions.jsonl: missing" in err
    assert "shards/0-of-2/predictions.jsonl: made for another config" in err
    assert evaluate.main(["shard", *common, "--shard", "1", "--num-shards", "2"]) == 0
    assert evaluate.main(["merge", *common, "--num-shards", "2"]) == 0
    assert (out / "manifest.json").exists() and not (out / "shards").exists()
