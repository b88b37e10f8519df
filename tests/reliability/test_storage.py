"""Never corrupt, never mislead: what a kill, a full disk, a second run or a missing shard leaves on
disk is either the previous complete state, the new complete one, or something every reader refuses
with the folder named - never partial data accepted as whole, never old numbers shown as new."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from lib import io as vio
from lib.core.paths import ROOT, stage_dir
from lib.core.schema import Item
from lib.families.scrapbook import ScrapbookParamError, ScrapbookParams, generate, merge
from lib.io import artifacts
from tests.support.scrapbook import SMALL

# a build started by a subprocess once the file named by argv[3] exists (so two start together)
BUILD = """
import json, sys, time
from pathlib import Path
from lib.families.scrapbook import ScrapbookParams, generate
go = Path(sys.argv[3])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.002)
generate(ScrapbookParams(**json.loads(sys.argv[2])), sys.argv[1], progress=False)
"""


def _build(out: Path, seed: int, go: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", BUILD, str(out), json.dumps({**SMALL, "seed": seed}), str(go)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _state(folder: Path) -> dict:
    """What a reader takes from a dataset folder: the items file, scenes, images, summary and manifest."""
    return {
        "items": (folder / "items.jsonl").read_bytes(),
        "scenes": (folder / "scenes.jsonl").read_bytes(),
        "images": sorted((p.name, p.read_bytes()) for p in (folder / "images").iterdir()),
        "seed": json.loads((folder / "summary.json").read_text())["params"]["seed"],
        "num_items": json.loads((folder / "dataset.json").read_text())["num_items"],
    }


def _assert_whole(folder: Path, references: dict[int, dict]) -> int:
    """``folder`` is exactly one of the ``references`` (by seed), loads, and its manifest counts
    its items; returns that seed."""
    state = _state(folder)
    seed = state["seed"]
    assert seed in references, seed
    assert state == references[seed], (
        f"{folder} mixes builds: its summary says seed {seed}, its files differ"
    )
    items = vio.load_items(folder)
    assert len(items) == state["num_items"] == state["items"].count(b"\n")
    vio.verify_dataset(folder)
    return seed


def _references(tmp_path: Path, seeds) -> dict[int, dict]:
    refs = {}
    for seed in seeds:
        generate(ScrapbookParams(**SMALL, seed=seed), tmp_path / f"ref{seed}", progress=False)
        refs[seed] = _state(tmp_path / f"ref{seed}")
    return refs


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


# --- finding 1: two runs building one dataset at once ------------------------------------------------


def test_two_concurrent_builds_of_one_dataset_each_swap_in_a_whole_one(tmp_path):
    """Two processes generate the same dataset folder at once (different seeds, so a mix shows):
    both finish, and the folder is exactly one of the two builds - items, scenes, images, summary
    and manifest from the same build - with nothing left beside it."""
    refs = _references(tmp_path, (1, 2))
    out, go = tmp_path / "sets" / "train", tmp_path / "go"
    out.parent.mkdir()
    procs = [_build(out, seed, go) for seed in (1, 2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    go.touch()
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in results]
    _assert_whole(out, refs)
    assert _leftovers(out) == []


# --- finding 2: a dataset is complete only when its manifest says so ---------------------------------


def _items(n: int) -> list[Item]:
    return [
        Item(id=f"q{i}", task="vqa.open", question=f"what is {i}?", answer=[str(i)])
        for i in range(n)
    ]


def _readers(folder: Path):
    """Every way a later stage reads a dataset's items."""
    return {
        "load_items": lambda: vio.load_items(folder),
        "scan_items": lambda: list(vio.scan_items(folder)),
        "ItemsAt": lambda: list(vio.ItemsAt(folder, [0])),
        "read_items_at": lambda: vio.read_items_at(folder, [0]),
        "item_index": lambda: vio.item_index(folder, rebuild=True),
    }


def test_a_dataset_whose_write_stopped_before_its_manifest_is_refused(tmp_path, monkeypatch):
    """save_dataset stopped (a kill, a full disk) after writing items.jsonl but before the
    manifest: every reader refuses the folder, naming it and saying to rerun."""
    folder = tmp_path / "ds"
    real = vio.write_json

    def full_disk(path, obj):
        if Path(path).name == "dataset.json" and "num_items" in obj:  # the manifest, written last
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, obj)

    monkeypatch.setattr(vio.datasets, "write_json", full_disk)  # what save_dataset calls
    with pytest.raises(OSError, match="No space left"):
        vio.save_dataset(folder, _items(5), vio.dataset_info("ds"))
    monkeypatch.setattr(vio.datasets, "write_json", real)
    assert (folder / "items.jsonl").exists()
    for name, read in _readers(folder).items():
        with pytest.raises(ValueError, match=rf"{folder}: .*never finished.*rerun") as refused:
            read()
        assert refused.type is vio.IncompleteDataset, name
    assert not vio.check_dataset(folder).ok


def test_a_partial_items_file_is_refused_by_every_reader(tmp_path):
    """A Scrapbook dataset whose items.jsonl lost its end (the old shared build folder's result,
    an interrupted copy): refused, naming the folder and the counts, never read as a smaller dataset."""
    folder = tmp_path / "sb"
    generate(ScrapbookParams(**SMALL), folder, progress=False)
    whole = (folder / "items.jsonl").read_bytes()
    lines = whole.splitlines(keepends=True)
    (folder / "items.jsonl").write_bytes(b"".join(lines[: len(lines) // 2]))
    for name, read in _readers(folder).items():
        with pytest.raises(
            ValueError,
            match=rf"{folder}: items.jsonl holds .* bytes but dataset.json "
            rf"records .*rerun",
        ) as refused:
            read()
        assert refused.type is vio.IncompleteDataset, name
    # rewritten with other content of the same length: the full check (python -m lib.formats check) tells
    at = whole.index(b'"question":"') + len(b'"question":"')
    (folder / "items.jsonl").write_bytes(
        whole[:at] + whole[at : at + 1].swapcase() + whole[at + 1 :]
    )
    assert len(vio.load_items(folder)) == whole.count(
        b"\n"
    )  # a reader's checks are cheap: size and count
    assert [p.field for p in vio.check_dataset(folder).problems] == ["items_sha256"]
    with pytest.raises(vio.IncompleteDataset, match="sha256"):
        vio.verify_dataset(folder)


def test_an_old_manifest_with_only_a_count_still_guards_and_hand_made_folders_load(tmp_path):
    """Folders written before manifests recorded sizes (num_items only) load, and a count that
    does not match is refused once the file is read; folders made by hand (no dataset.json, or one
    without manifest fields) load as before."""
    old = tmp_path / "old"
    vio.save_dataset(old, _items(4), vio.dataset_info("old"))
    info = json.loads((old / "dataset.json").read_text())
    for key in ("items_bytes", "items_sha256", "num_images"):
        del info[key]
    (old / "dataset.json").write_text(json.dumps(info))
    assert [it.id for it in vio.load_items(old)] == ["q0", "q1", "q2", "q3"]
    lines = (old / "items.jsonl").read_text().splitlines(keepends=True)
    (old / "items.jsonl").write_text("".join(lines[:3]))
    with pytest.raises(ValueError, match=r"holds 3 items but dataset.json records 4"):
        vio.load_items(old)

    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / "items.jsonl").write_text("".join(lines[:3]))
    assert len(vio.load_items(hand)) == 3
    (hand / "dataset.json").write_text(json.dumps({"name": "mine", "license": "CC0"}))
    assert len(vio.load_items(hand)) == 3 and len(vio.ItemsAt(hand, [0])) == 1


# --- finding 3: metrics tables always come from the predictions beside them ---------------------------

TINY = {"backend": "tiny", "name": "llava", "image_size": 56, "patch": 8, "question_first": True}


@pytest.fixture(scope="module")
def mcq(tmp_path_factory):
    from lib.stages.setup import demo_datasets

    return str(demo_datasets(tmp_path_factory.mktemp("storage-data"))["mcq"])


def _evaluate(mcq: str, out: Path, max_items: int):
    from lib.models.store import CallStore
    from lib.stages import evaluate

    cfg = evaluate.EvalConfig(
        datasets={"mcq": mcq},
        models={"tiny": TINY},
        styles=["zero_shot"],
        max_new_tokens=4,
        max_items=max_items,
        n_resamples=20,
        tasks={"yesbut.understanding": {"text_metrics": ["bleu"]}},
    )
    return evaluate.run(cfg, out, store=CallStore(out.parent / "calls.sqlite"), progress=False)


def _asked(out: Path) -> int:
    """How many questions 06's metrics say were asked (its readers refuse stale tables)."""
    m = artifacts.read_table(out.parent, artifacts.EVALUATE, artifacts.METRICS)
    return int(m.loc[m["metric"] == "invalid_rate", "n"].iloc[0])


@pytest.mark.parametrize(
    "fail_at", [1, 2]
)  # the disk fills writing metrics.csv, or writing levels.csv after it
def test_a_full_disk_while_writing_the_tables_never_shows_the_old_metrics_as_new(
    mcq, monkeypatch, capsys, fail_at
):
    """Stage 06 rerun on other questions runs out of disk space while writing its tables, after the
    new predictions and manifest are written: the report withholds the old metrics and says why,
    the readers refuse them, and rescore (no model) makes tables of the current predictions."""
    from lib.pages.report import build_report
    from lib.stages import evaluate

    run = f"enospc-{fail_at}"
    out = stage_dir(run, artifacts.EVALUATE)
    _evaluate(mcq, out, max_items=4)
    assert _asked(out) == 4
    assert "Headline metrics" in build_report(out.parent).read_text()

    real, calls = pd.DataFrame.to_csv, []

    def disk_full(self, *a, **k):
        calls.append(1)
        if len(calls) == fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(pd.DataFrame, "to_csv", disk_full)
    with pytest.raises(OSError, match="No space left"):
        _evaluate(mcq, out, max_items=7)
    monkeypatch.setattr(pd.DataFrame, "to_csv", real)
    assert (
        len(list(vio.read_jsonl(out / artifacts.PREDICTIONS))) == 7
        and (out / artifacts.EVAL_MANIFEST).exists()
    )
    assert not [
        p.name for p in out.iterdir() if p.name.endswith(".tmp")
    ]  # no half-written table left about

    with pytest.raises(
        ValueError, match=rf"{out}.*python -m lib.stages.evaluate rescore --run {run}"
    ) as refused:
        artifacts.read_table(out.parent, artifacts.EVALUATE, artifacts.METRICS)
    assert refused.type is artifacts.StaleTables
    page = build_report(out.parent).read_text()
    assert (
        "Metrics withheld" in page
        and "Stale results withheld" in page
        and "Headline metrics" not in page
    )

    assert evaluate.main(["rescore", "--run", run]) == 0
    assert "replaced stale tables" in capsys.readouterr().err
    assert _asked(out) == 7
    page = build_report(out.parent).read_text()
    assert "Headline metrics" in page and "withheld" not in page


def test_tables_edited_or_predictions_replaced_after_scoring_are_refused(mcq):
    """The record of what the tables came from is checked, not only its presence: a table
    replaced after scoring, or new predictions, make every reader refuse them."""
    out = stage_dir("tables-record", artifacts.EVALUATE)
    _evaluate(mcq, out, max_items=4)
    assert artifacts.stale_tables(out) is None
    metrics = out / artifacts.METRICS
    kept = metrics.read_bytes()
    metrics.write_bytes(kept.replace(b"tiny", b"tinY"))
    assert "metrics.csv is not the table recorded" in artifacts.stale_tables(out)
    metrics.write_bytes(kept)
    assert artifacts.stale_tables(out) is None
    with open(out / artifacts.PREDICTIONS, "a") as f:
        f.write("\n")
    assert "other predictions than the current predictions.jsonl" in artifacts.stale_tables(out)


def test_an_atomic_write_stopped_by_a_full_disk_leaves_the_old_file_whole(tmp_path):
    """Every JSON, JSONL and CSV writer goes through one atomic file: the disk filling up half way
    leaves the previous content and no temporary file."""
    path = tmp_path / "metrics.csv"
    vio.write_csv(path, pd.DataFrame({"a": [1, 2]}))
    before = path.read_bytes()
    with pytest.raises(OSError, match="No space"), vio.atomic_file(path) as f:
        f.write(b"a\n9\n")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["metrics.csv"]


# --- finding 4: a merge never passes some shards off as the whole dataset ---------------------------


def test_merging_a_shard_set_with_gaps_is_refused_naming_the_missing_shards(tmp_path):
    params = ScrapbookParams(**SMALL)
    shards = [tmp_path / f"shard{i}" for i in range(3)]
    for i in (0, 2):
        generate(params, shards[i], shard=i, num_shards=3, progress=False)
    with pytest.raises(ScrapbookParamError, match=r"shard\(s\) 1 missing"):
        merge([shards[0], shards[2]], tmp_path / "merged")
    with pytest.raises(ScrapbookParamError, match=r"shard\(s\) 1, 2 missing"):
        merge([shards[0]], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
    # a shard whose items were cut short is no finished shard
    generate(params, shards[1], shard=1, num_shards=3, progress=False)
    items = shards[1] / "items.jsonl"
    items.write_bytes(items.read_bytes()[: items.stat().st_size // 2])
    with pytest.raises(ScrapbookParamError, match=rf"{shards[1]}: items.jsonl holds"):
        merge(shards, tmp_path / "merged")
    # and a merged folder is not a shard of anything
    generate(params, shards[1], shard=1, num_shards=3, progress=False)
    merge(shards, tmp_path / "merged")
    with pytest.raises(ScrapbookParamError, match="merged already"):
        merge([tmp_path / "merged"], tmp_path / "again")


# --- fault injection: kill a build at random points ------------------------------------------------


def test_a_build_killed_at_random_points_leaves_the_previous_or_the_new_dataset(tmp_path):
    """SIGKILL a regeneration at a few seeded random moments (from its start to past its end):
    the folder is always exactly the previous complete build or the new one, loads as such, and a
    later build clears what the killed ones left beside it."""
    refs = _references(tmp_path, (1, 2))
    out, go = tmp_path / "ds", tmp_path / "go"
    proc = _build(
        tmp_path / "timing", 2, go
    )  # how long a build takes in a fresh process, from the start signal
    assert proc.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    go.touch()
    proc.communicate(timeout=300)
    seconds = time.perf_counter() - start
    go.unlink()
    generate(ScrapbookParams(**SMALL, seed=1), out, progress=False)
    rng = random.Random(0)
    for _ in range(4):
        previous = _state(out)["seed"]
        proc = _build(out, 3 - previous, go)  # the other seed: its swap-in shows
        assert proc.stdout.readline().strip() == "ready"
        go.touch()
        time.sleep(rng.uniform(0.05, 1.1) * seconds)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        go.unlink()
        if not out.exists():  # only a swap without Linux's one-step exchange has that moment
            assert vio.swap._renameat2() is None, "the dataset folder vanished"
            generate(ScrapbookParams(**SMALL, seed=1), out, progress=False)
        _assert_whole(out, refs)
    generate(ScrapbookParams(**SMALL, seed=1), out, progress=False)
    _assert_whole(out, refs)
    assert (
        _leftovers(out) == []
    )  # the killed builds' folders (their processes are gone) were cleared
