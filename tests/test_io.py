import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from lib import formats
from lib import io as vio
from lib.core.schema import Item
from lib.families.memeqa import importer as memeqa
from lib.families.memeqa.collect import collect_memeqa
from lib.formats.__main__ import main
from lib.io import folders

from .support.data import SHARED_DATA


def _bad_images(folder):
    """One file per failure mode, plus one good image."""
    good = folder / "good.png"
    Image.new("RGB", (32, 32), "red").save(good)
    (folder / "empty.png").write_bytes(b"")
    (folder / "truncated.png").write_bytes(good.read_bytes()[:60])
    noise = folder / "noise.png"
    Image.frombytes("RGB", (64, 64), bytes(range(256)) * 48).save(noise)
    corrupt = bytearray(noise.read_bytes())
    middle = len(corrupt) // 2
    corrupt[middle : middle + 64] = b"\xff" * 64  # damage the compressed pixel data, not the header
    (folder / "corrupt.png").write_bytes(bytes(corrupt))
    noise.unlink()
    (folder / "notes.png").write_text("this is not an image")
    Image.new("1", (10_000, 10_000)).save(folder / "bomb.png")  # 100 M pixels, a few kB on disk
    return good


@pytest.mark.parametrize(
    "name, reason",
    [
        ("empty.png", "empty file"),
        ("truncated.png", "truncated or corrupt"),
        ("corrupt.png", "truncated or corrupt"),
        ("notes.png", "not an image"),
        ("bomb.png", "decompression bomb"),
        ("missing.png", "no such image"),
    ],
)
def test_bad_image_raises_naming_the_file(tmp_path, name, reason):
    _bad_images(tmp_path)
    with pytest.raises(vio.ImageError, match=reason) as e:
        vio.load_image(tmp_path / name)
    assert name in str(e.value)


def test_collection_loaders_skip_count_and_report_bad_files(tmp_path):
    good = _bad_images(tmp_path)
    (tmp_path / "README.txt").write_text("not an image either")
    paths, report = vio.scan_images(tmp_path)
    assert paths == [good]
    assert report.loaded == 1 and len(report.skipped) == 6
    assert {p.split("/")[-1] for p, _ in report.skipped} == {
        "empty.png",
        "truncated.png",
        "corrupt.png",
        "notes.png",
        "bomb.png",
        "README.txt",
    }
    images, report2 = vio.load_images(sorted(tmp_path.glob("*.png")))
    assert list(images) == [str(good)] and len(report2.skipped) == 5
    assert "bomb.png" in str(report2)


def test_jsonl_malformed_line_reports_file_and_line(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3,\n')
    with pytest.raises(vio.JSONLError, match=r"items.jsonl:4"):
        list(vio.read_jsonl(path))


def test_write_jsonl_is_atomic_on_failure(tmp_path):
    path = tmp_path / "out.jsonl"
    vio.write_jsonl(path, [{"a": 1}])

    def rows():
        yield {"a": 2}
        raise RuntimeError("generator died")

    with pytest.raises(RuntimeError):
        vio.write_jsonl(path, rows())
    assert list(vio.read_jsonl(path)) == [{"a": 1}]  # old content intact, no partial file
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_append_jsonl_appends_whole_lines(tmp_path):
    path = tmp_path / "log.jsonl"
    vio.append_jsonl(path, [{"i": 0}])
    vio.append_jsonl(path, [{"i": 1}, {"i": 2}])
    assert [r["i"] for r in vio.read_jsonl(path)] == [0, 1, 2]


def _dataset(folder):
    (folder / "images").mkdir(parents=True)
    Image.new("RGB", (16, 16), "blue").save(folder / "images" / "a.png")
    Image.new("RGB", (16, 16), "red").save(folder / "images" / "b.jpg")
    items = [
        Item(
            id="s1",
            task="mcq",
            question="Colour?",
            images=["images/a.png"],
            options=["red", "blue"],
            answer=[1],
            meta={"general_type": "single", "specific_type": "Colour"},
        ),
        Item(
            id="m1",
            task="mcq",
            question="Which apply?",
            images=["images/b.jpg"],
            options=["red", "warm", "blue"],
            answer=[0, 1],
            meta={"general_type": "multi", "specific_type": "Colour"},
        ),
    ]
    vio.save_dataset(folder, items, vio.dataset_info("toy", license="CC0"))
    return items


def test_dataset_folder_round_trips_and_loads_with_hf_datasets(tmp_path):
    items = _dataset(tmp_path / "ds")
    assert vio.load_items(tmp_path / "ds") == items
    info = vio.load_dataset_info(tmp_path / "ds")
    assert info["num_items"] == 2 and info["license"] == "CC0" and "created" in info
    hf = vio.to_hf_dataset(tmp_path / "ds")
    assert hf.num_rows == 2 and hf[1]["answer"] == [0, 1] and hf[0]["images"] == ["images/a.png"]


def test_a_reader_shares_the_strings_items_repeat_unless_told_not_to(tmp_path):
    """Items read to be kept hold one copy of a repeated label (``meta``, ``task``), not one each;
    a pass that lets them go skips the interning. The question, unique per item, is not shared."""
    _dataset(tmp_path / "ds")
    a, b = vio.load_items(tmp_path / "ds")
    assert a.meta["specific_type"] is b.meta["specific_type"] and a.task is b.task
    (_, c), (_, d) = vio.scan_items(tmp_path / "ds", share=False)
    assert (
        c.meta["specific_type"] == d.meta["specific_type"]
        and c.meta["specific_type"] is not d.meta["specific_type"]
    )
    e, f = vio.read_items_at(tmp_path / "ds", [0, 0])
    assert e.question == f.question and e.question is not f.question


def test_duplicate_ids_are_refused(tmp_path):
    item = Item(id="x", task="vqa.open", question="?", answer=["a"])
    with pytest.raises(ValueError, match="duplicate item id 'x'"):
        vio.save_dataset(tmp_path, [item, item], vio.dataset_info("dup"))


def test_tsv_round_trip_with_base64_images(tmp_path):
    items = _dataset(tmp_path / "ds")
    n = formats.export_tsv(tmp_path / "ds", items, tmp_path / "bench.tsv")
    back, report = formats.import_tsv(tmp_path / "bench.tsv", tmp_path / "imported")
    assert n == 2 and report.loaded == 2 and not report.skipped
    assert [(b.id, b.options, b.answer) for b in back] == [
        (i.id, i.options, i.answer) for i in items
    ]
    for b, i in zip(back, items):  # image bytes survive unchanged
        assert (tmp_path / "imported" / b.images[0]).read_bytes() == (
            tmp_path / "ds" / i.images[0]
        ).read_bytes()


def test_tsv_import_reports_rows_with_bad_images(tmp_path):
    items = _dataset(tmp_path / "ds")
    formats.export_tsv(tmp_path / "ds", items, tmp_path / "bench.tsv")
    lines = (tmp_path / "bench.tsv").read_text().splitlines()
    cols = lines[1].split("\t")
    cols[2] = "bm90IGFuIGltYWdl"  # base64 of "not an image"
    lines[1] = "\t".join(cols)
    (tmp_path / "bench.tsv").write_text("\n".join(lines) + "\n")
    back, report = formats.import_tsv(tmp_path / "bench.tsv", tmp_path / "imported")
    assert [b.id for b in back] == ["m1"]
    assert len(report.skipped) == 1 and "id=s1" in report.skipped[0][0]


def test_tsv_export_names_a_bad_image(tmp_path):
    items = _dataset(tmp_path / "ds")
    (tmp_path / "ds" / "images" / "a.png").write_bytes(b"")
    with pytest.raises(vio.ImageError, match="a.png"):
        formats.export_tsv(tmp_path / "ds", items, tmp_path / "bench.tsv")


MEMEQA = SHARED_DATA / "memeqa"


@pytest.mark.needs_data("memeqa")
@pytest.mark.parametrize("variant", ["none-plus", "none-minus"])
def test_memeqa_dev_round_trips(tmp_path, variant):
    src = MEMEQA / variant / "dev.json"
    items = memeqa.import_memeqa(src)
    original = json.loads(src.read_text())
    assert len(items) == len(original) == 1973
    assert len({i.meta["specific_type"] for i in items}) == 11
    multi = [i for i in items if i.meta["general_type"] == "multi"]
    assert multi and all(isinstance(i.answer, list) for i in multi)
    memeqa.export_memeqa(items, tmp_path / "dev.json")
    assert json.loads((tmp_path / "dev.json").read_text()) == original


def test_memeqa_missing_key_is_named(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            [
                {
                    "id": "q",
                    "img": "a.png",
                    "question": "?",
                    "options": ["a"],
                    "general_type": "single",
                }
            ]
        )
    )
    with pytest.raises(
        ValueError,
        match=r"bad.json: record 0 \(id='q'\) lacks key\(s\) \['specific_type', 'answer_key'\]",
    ):
        memeqa.import_memeqa(path)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"options": "A cat; A dog"}, "options must be a list of at least 2 strings"),
        ({"options": ["only one"]}, "options must be a list of at least 2 strings"),
        ({"answer_key": 7}, "answer_key 7 does not fit 3 options"),
        ({"general_type": "multi", "answer_key": [1, 0]}, "does not fit 3 options"),
        ({"question": None}, "question must be a string"),
        ({"general_type": "several"}, "general_type must be 'single' or 'multi'"),
    ],
)
def test_every_memeqa_reader_refuses_the_same_bad_record_by_name(tmp_path, change, message):
    from lib.af import from_split

    good = {
        "id": "intent/1",
        "img": "a.png",
        "question": "Why?",
        "options": ["x", "y", "z"],
        "general_type": "single",
        "specific_type": "Intent",
        "answer_key": 1,
    }
    path = tmp_path / "split.json"
    path.write_text(json.dumps([good, {**good, "id": "intent/2", **change}]))
    for read in (
        lambda: memeqa.import_memeqa(path),
        lambda: from_split(path, tmp_path),
        lambda: collect_memeqa(path, tmp_path, progress=False),
    ):
        with pytest.raises(
            ValueError, match=rf"split\.json: record 1 \(id='intent/2'\).*{message}"
        ):
            read()


def test_an_item_with_fewer_than_two_options_is_refused_by_name():
    with pytest.raises(
        ValueError, match=r"Item 'q': a multiple-choice item needs at least 2 options"
    ):
        Item(id="q", task="mcq", question="?", options=["only"], answer=[0])


@pytest.mark.parametrize(
    "max_items", [0, 3]
)  # all items (checked in the pass) or a sample (checked after)
def test_an_evaluation_names_the_items_whose_images_cannot_be_read(tmp_path, max_items):
    from lib.eval.items import load_eval_items
    from lib.stages import evaluate

    (tmp_path / "d" / "images" / "folder.png").mkdir(parents=True)
    vio.save_dataset(
        tmp_path / "d",
        [
            Item(id="a", task="vqa.open", question="?", images=["images/gone.png"], answer=["x"]),
            Item(id="b", task="vqa.open", question="?", images=["images/folder.png"], answer=["x"]),
            Item(id="c", task="vqa.open", question="?", images=["images/gone.png"], answer=["x"]),
        ],
        vio.dataset_info("d"),
    )
    cfg = evaluate.EvalConfig(
        datasets={"d": str(tmp_path / "d")},
        models={"m": {"backend": "tiny", "name": "llava"}},
        max_items=max_items,
    )
    with pytest.raises(
        ValueError,
        match=r"dataset 'd' .*2 image\(s\).*a: images/gone.png \(missing\); "
        r"b: images/folder.png \(not a file\)",
    ):
        load_eval_items(cfg)


def test_an_annotation_file_that_is_no_list_of_records_is_refused_by_name(tmp_path):
    from lib.stages import annotate

    path = tmp_path / "ann.yaml"
    path.write_text("item: pair-1\nannotator: ana\n")
    with pytest.raises(ValueError, match=r"ann\.yaml: an annotation file is a list of records"):
        annotate.load_annotation_file(path, annotate.AnnotationStore(tmp_path / "a.jsonl"))


def test_image_paths_that_leave_the_dataset_folder_are_refused_unless_declared(tmp_path):
    """An absolute path or one escaping with .. is read and, with an API backend, sent off the
    machine: an evaluation refuses it unless dataset.json declares the folder it points into."""
    from lib.eval.items import load_eval_items
    from lib.stages import evaluate

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    Image.new("RGB", (8, 8)).save(outside / "secret.png")
    items = [
        Item(
            id="abs",
            task="vqa.open",
            question="?",
            images=[str(outside / "secret.png")],
            answer=["x"],
        ),
        Item(
            id="up", task="vqa.open", question="?", images=["../elsewhere/secret.png"], answer=["x"]
        ),
    ]
    vio.save_dataset(tmp_path / "d", items, vio.dataset_info("d"))
    cfg = evaluate.EvalConfig(
        datasets={"d": str(tmp_path / "d")}, models={"m": {"backend": "tiny", "name": "llava"}}
    )
    with pytest.raises(
        ValueError,
        match=r"2 image path\(s\) leave the dataset folder .*abs: .*secret.png; up: \.\./elsewhere",
    ):
        load_eval_items(cfg)
    vio.save_dataset(
        tmp_path / "d",
        items,
        vio.dataset_info("d", images_roots=vio.images_roots(items, tmp_path / "d")),
    )
    assert [it.id for it in load_eval_items(cfg)["d"][1]] == ["abs", "up"]  # declared: allowed


def test_a_stage_dataset_holds_the_images_its_run_made_and_reads_the_same_when_moved(tmp_path):
    """held_images: an image elsewhere in the run is linked into the dataset's images/ (two files of
    one name kept apart), one inside the folder named relative to it, one outside the run kept by
    its path; the items are the same bytes in another run folder, and the folder reads moved."""
    external = tmp_path / "mine" / "photo.png"
    external.parent.mkdir()
    Image.new("RGB", (8, 8), "blue").save(external)

    def build(run: Path) -> Path:
        made = run / "01_collect" / "images"
        for sub, colour in (("pairs", "red"), ("variants", "green")):
            (made / sub).mkdir(parents=True)
            Image.new("RGB", (8, 8), colour).save(made / sub / "a.png")
        folder = run / "03_adversarial_filter" / "datasets" / "adv"
        (folder / "images").mkdir(parents=True)
        Image.new("RGB", (8, 8), "white").save(folder / "images" / "a.png")  # the folder's own
        paths = [
            [str(made / "pairs" / "a.png")],
            [str(made / "variants" / "a.png")],
            [str(folder / "images" / "a.png")],
            [str(made / "pairs" / "a.png"), str(external)],
        ]
        items = [
            Item(id=str(i), task="vqa.open", question="q", answer=["a"], images=ims)
            for i, ims in enumerate(paths, 1)
        ]
        held = vio.held_images(items, folder)
        vio.save_dataset(
            folder, held, vio.dataset_info("adv", images_roots=vio.images_roots(held, folder))
        )
        return folder

    one, two = build(tmp_path / "run1"), build(tmp_path / "run2")
    assert (one / "items.jsonl").read_bytes() == (two / "items.jsonl").read_bytes()
    images = [it.images for it in vio.load_items(one)]
    assert images == [
        ["images/a-2.png"],
        ["images/a-3.png"],
        ["images/a.png"],
        ["images/a-2.png", str(external)],
    ]
    colours = {
        im: Image.open(one / im).getpixel((0, 0))
        for im in ("images/a.png", "images/a-2.png", "images/a-3.png")
    }
    assert colours == {
        "images/a.png": (255, 255, 255),
        "images/a-2.png": (255, 0, 0),
        "images/a-3.png": (0, 128, 0),
    }
    assert vio.load_dataset_info(one)["images_roots"] == [str(external.parent)]
    # the run's other files gone: the dataset still reads
    shutil.rmtree(tmp_path / "run1" / "01_collect")
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "run1", moved)
    folder = moved / "03_adversarial_filter" / "datasets" / "adv"
    assert not vio.outside_images(
        folder, [(it.id, im) for it in vio.load_items(folder) for im in it.images]
    )
    assert all(
        Image.open(folder / im).size == (8, 8) for it in vio.load_items(folder) for im in it.images
    )


def test_tsv_import_reports_a_malformed_answer_and_refuses_a_decompression_bomb(
    tmp_path, monkeypatch
):
    import base64
    import io as _io

    buf = _io.BytesIO()
    Image.new("RGB", (64, 64)).save(buf, format="PNG")
    png = base64.b64encode(buf.getvalue()).decode()
    tsv = tmp_path / "t.tsv"
    tsv.write_text(
        "id\tquestion\tanswer\timage\n"
        f'ok\twhat?\t["a", "b"]\t{png}\n'
        f'broken\twhat?\t["a", \t{png}\n'
        f"numbers\twhat?\t[1, 2]\t{png}\n"
    )
    items, report = formats.import_tsv(tsv, tmp_path / "out", task="vqa.open")
    assert [it.id for it in items] == ["ok"] and report.loaded == 1
    why = dict(report.skipped)
    assert (
        "not valid JSON" in why[f"{tsv}:3 (id=broken)"]
        and "not a list of reference texts" in why[f"{tsv}:4 (id=numbers)"]
    )
    monkeypatch.setattr(
        Image, "MAX_IMAGE_PIXELS", 64 * 64 - 1
    )  # 64x64 is now "a bomb" (warning range)
    items, report = formats.import_tsv(tsv, tmp_path / "out2", task="vqa.open")
    assert items == [] and report.loaded == 0
    assert "DecompressionBomb" in dict(report.skipped)[f"{tsv}:2 (id=ok)"]


def test_image_cache_decodes_each_file_once_within_its_byte_budget(tmp_path):
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"{i}.png")
        Image.new("RGB", (100, 100), (i, 0, 0)).save(paths[-1])  # 30,000 bytes decoded
    cache = vio.ImageCache(max_mb=70_000 / 2**20)  # room for two
    a = cache(paths[0])
    assert cache(str(paths[0])) is a and (cache.hits, cache.misses) == (1, 1)
    cache(paths[1]), cache(paths[2])  # the least recently used (0) goes
    assert cache.bytes == 60_000 and cache(paths[0]) is not a and cache.misses == 4
    with pytest.raises(vio.ImageError, match="missing.png"):
        cache(tmp_path / "missing.png")


def test_a_files_digest_is_hashed_once_and_again_when_the_file_changes(tmp_path, monkeypatch):
    import hashlib
    import os

    path = tmp_path / "items.jsonl"
    path.write_text('{"id": "a"}\n')
    first = vio.file_sha256(path)
    assert (
        first == hashlib.sha256(path.read_bytes()).hexdigest()
        and vio.file_sha256(tmp_path / "nothing") is None
    )
    calls = []
    real = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert vio.file_sha256(path) == first and not calls  # remembered: the file is not read again
    st = path.stat()
    path.write_text('{"id": "b"}\n')  # same size: the modification time tells
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert vio.file_sha256(path) == hashlib.sha256(b'{"id": "b"}\n').hexdigest() and calls == [1]
    assert vio.file_sha256(path, remember=False) == vio.file_sha256(path) and calls == [1, 1]


def test_jsonl_lines_are_never_read_across_line_ends(tmp_path):
    """Lines are decoded many at a time; lines that only make JSON together (an object opened on
    one line and closed on the next, two objects on one line) are still refused by line."""
    path = tmp_path / "x.jsonl"
    good = [{"id": i, "meta": {"k": "v"}} for i in range(5000)]
    vio.write_jsonl(path, good)
    assert list(vio.read_jsonl(path)) == good
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows == good
    path.write_text('{"a": 1}\n{"a": [{"b": 1}\n{"c": 2}]}\n{"d": 1},{"e": 2}\n')
    with pytest.raises(vio.JSONLError, match=r"x.jsonl:2: malformed JSON line"):
        list(vio.read_jsonl(path))


@pytest.mark.parametrize(
    "lines",
    [
        ['{"a": [{"b": 1}', '{"c": 2}]}', '{"d": 1},{"e": 2}'],  # open + close, two on a line
        [
            '{"a": 1}],[{"b": 2}',
            '{"c": [{"d": 1}',
            '{"e": 3}]}',
        ],  # a line closing the wrapper, then a merge
        ['{"a": 1}],[[{"b": 2}', '{"c": 3}]', '{"d": 4}'],
        ['[{"a": 1}]', '{"b": 2}'],
        ['"text"', '{"b": 2}'],
        ['{"a": 1}', '{"b": 2} {"c": 3}'],
    ],
)
def test_lines_that_are_not_one_object_each_are_never_decoded_together(lines):
    assert vio.decode_lines(lines) is None
    assert vio.decode_lines([line.encode() + b"\n" for line in lines]) is None
    assert vio.decode_lines(['{"a": 1}\n', '{"b": "]"}\n']) == [{"a": 1}, {"b": "]"}]


def test_items_read_at_offsets_on_demand_are_the_items_and_check_their_ids(tmp_path, monkeypatch):
    """ItemsAt (what an evaluation holds instead of its questions) gives the items at its offsets
    by index, slice and iteration across read chunks, and refuses a line that is not the indexed
    item, naming the file, the byte and both ids."""
    items = [
        Item(id=f"q{i}", task="vqa.open", question=f"what is {i}?", images=[], answer=[str(i)])
        for i in range(11)
    ]
    vio.save_dataset(tmp_path, items, {"name": "t"})
    index = vio.item_index(tmp_path)
    order = ["q7", "q0", "q10", "q3", "q3", "q9", "q1"]
    monkeypatch.setattr(vio.datasets, "CHUNK_LINES", 3)  # iteration crosses chunks
    lazy = vio.ItemsAt(tmp_path, [index[i] for i in order], ids=order)
    assert len(lazy) == 7 and [it.id for it in lazy] == order
    assert (
        lazy[2].question == "what is 10?"
        and lazy[-1].id == "q1"
        and [it.id for it in lazy[1:4]] == order[1:4]
    )
    with pytest.raises(IndexError):
        lazy[7]
    wrong = vio.ItemsAt(tmp_path, [index["q2"], index["q5"]], ids=["q2", "q4"])
    assert wrong[0].id == "q2"
    with pytest.raises(
        vio.ItemsChanged,
        match=rf"items.jsonl: the record at byte {index['q5']} is item 'q5', not 'q4'",
    ):
        list(wrong)


def _index_at_once(folder, start, n):
    start.wait()
    ids, offsets = [f"q{i}" for i in range(20000)], list(range(20000))
    for _ in range(n):
        vio.save_item_index(folder, ids, offsets)


def test_processes_indexing_one_dataset_at_once_all_succeed(tmp_path):
    """The ranks of a torchrun job index the same items.jsonl at the same moment: each writes its
    own temporary file and renames it over the index, so none finds its file taken by another."""
    import multiprocessing as mp

    vio.save_dataset(
        tmp_path,
        [Item(id="q0", task="vqa.open", question="?", images=[], answer=["a"])],
        {"name": "t"},
    )
    ctx = mp.get_context("fork")
    start = ctx.Barrier(3)
    procs = [ctx.Process(target=_index_at_once, args=(tmp_path, start, 40)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len(vio.item_index(tmp_path)) == 20000


# --- your own dataset: check, import-csv, import-hf, the command line ------------------------------

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "my_dataset"


def _example_copy(tmp_path):
    return Path(shutil.copytree(EXAMPLE, tmp_path / "ds"))


def test_the_example_dataset_passes_its_check():
    found = vio.check_dataset(EXAMPLE)
    assert found.ok, str(found)
    assert (found.items, found.images) == (5, 3)
    assert {it.task for it in vio.load_items(EXAMPLE)} == {"mcq", "vqa.open"}
    assert all(p.stat().st_size < 20_000 for p in (EXAMPLE / "images").iterdir())


def _lines(folder):
    return (folder / "items.jsonl").read_text().splitlines()


def _set_line(folder, n, text):
    lines = _lines(folder)
    lines[n - 1] = text
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n")


def _edit(folder, n, **changes):
    _set_line(folder, n, json.dumps({**json.loads(_lines(folder)[n - 1]), **changes}))


def _bad_json(ds):
    _set_line(ds, 2, _lines(ds)[1][:-5])


def _duplicate_id(ds):
    _edit(ds, 4, id="chelsea-animal")


def _missing_image(ds):
    _edit(ds, 3, images=["images/nowhere.png"])


def _unreadable_image(ds):
    (ds / "images" / "broken.png").write_bytes((ds / "images" / "coffee.png").read_bytes()[:100])
    _edit(ds, 5, images=["images/broken.png"])


def _escaping_image(ds):
    _edit(ds, 1, images=["../elsewhere.png"])


def _answer_out_of_range(ds):
    _edit(ds, 1, answer=[7])


def _two_answers_for_a_single_answer_item(ds):
    _edit(ds, 2, answer=[0, 1])


def _missing_dataset_json(ds):
    (ds / "dataset.json").unlink()


@pytest.mark.parametrize(
    "damage, problem",
    [
        (_bad_json, ("items.jsonl", 2, "json", "malformed JSON")),
        (
            _duplicate_id,
            ("items.jsonl", 4, "id", "duplicate id 'chelsea-animal' (first on line 1)"),
        ),
        (_missing_image, ("items.jsonl", 3, "images[0]", "images/nowhere.png: no such image file")),
        (
            _unreadable_image,
            ("items.jsonl", 5, "images[0]", "images/broken.png: truncated or corrupt"),
        ),
        (_escaping_image, ("items.jsonl", 1, "images[0]", "leaves the dataset folder")),
        (_answer_out_of_range, ("items.jsonl", 1, "answer", "must be indices into 4 options")),
        (
            _two_answers_for_a_single_answer_item,
            ("items.jsonl", 2, "answer", "exactly one option index"),
        ),
        (_missing_dataset_json, ("dataset.json", None, "file", 'write {"name": "ds"')),
    ],
)
def test_each_kind_of_problem_is_named_by_file_line_and_field(tmp_path, damage, problem):
    ds = _example_copy(tmp_path)
    damage(ds)
    found = vio.check_dataset(ds)
    assert [(p.file, p.line, p.field) for p in found.problems] == [problem[:3]], str(found)
    assert problem[3] in found.problems[0].message
    assert str(found.problems[0]).startswith(
        f"{problem[0]}{'' if problem[1] is None else f':{problem[1]}'}: {problem[2]}: "
    )


def test_a_check_goes_on_past_the_first_problem_and_caps_its_list(tmp_path):
    ds = _example_copy(tmp_path)
    _edit(ds, 1, answer=[7], question=3, extra=1)
    _edit(ds, 2, id="chelsea-animal")
    found = vio.check_dataset(ds)
    assert sorted((p.line, p.field) for p in found.problems) == [
        (1, "answer"),
        (1, "extra"),
        (1, "question"),
        (2, "id"),
    ]
    (ds / "items.jsonl").write_text("{oops\n" * 60)
    found = vio.check_dataset(ds, limit=50)
    # 60 malformed lines, and dataset.json's num_items (5) no longer the count
    assert (
        len(found.problems) == 50
        and found.more == 11
        and str(found).endswith(f"and 11 more problem(s)\n{ds}: 61 problem(s)")
    )


@pytest.mark.parametrize("images_root", [None, EXAMPLE / "images"])
def test_import_csv_round_trips_the_example(tmp_path, images_root):
    csv_path = EXAMPLE / "data.csv"
    if images_root:  # the same CSV with its image paths relative to the images' own folder
        csv_path = tmp_path / "data.csv"
        csv_path.write_text((EXAMPLE / "data.csv").read_text().replace(",images/", ","))
    found = formats.import_csv(csv_path, tmp_path / "out", images_root=images_root)
    assert found.ok, str(found)
    assert vio.load_items(tmp_path / "out") == vio.load_items(EXAMPLE)
    for p in (EXAMPLE / "images").iterdir():
        assert (tmp_path / "out" / "images" / p.name).read_bytes() == p.read_bytes()
    assert (
        vio.load_dataset_info(tmp_path / "out")["provenance"]["importer"]
        == "python -m lib.formats import-csv"
    )


def test_import_csv_names_row_and_column_of_every_problem_and_writes_nothing(tmp_path):
    csv_path = tmp_path / "data.csv"
    Image.new("RGB", (8, 8), "red").save(tmp_path / "a.png")
    csv_path.write_text(
        "id,image,question,options,answer,meta\n"
        "q1,a.png,Colour?,red|blue,E,\n"
        "q1,missing.png,Colour?,red|blue,A,\n"
        'q3,a.png,Colour?,,red,"{""style"": ""plain""}"\n'
        "q4,a.png,Count?,1|2|3,2,\n"
    )
    with pytest.raises(vio.DatasetError) as e:
        formats.import_csv(csv_path, tmp_path / "out")
    assert [(p.file, p.line, p.field) for p in e.value.found.problems] == [
        ("data.csv", 2, "answer"),
        ("data.csv", 3, "id"),
        ("data.csv", 3, "image"),
        ("data.csv", 5, "answer"),
    ]
    assert "'E' is not a letter A-B" in str(e.value) and "names options [1, 2]" in str(e.value)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def _hf_rows(tmp_path):
    """A small Hugging Face dataset with an Image feature, and the items it should make."""
    import datasets

    images = [Image.new("RGB", (12, 10), c) for c in ("red", "blue")]
    ds = datasets.Dataset.from_dict(
        {
            "qid": [7, 8],
            "picture": images,
            "prompt": ["Colour?", "Which shade?"],
            "choices": [["red", "blue"], []],
            "label": ["A", "dark blue|navy"],
        },
        features=datasets.Features(
            {
                "qid": datasets.Value("int64"),
                "picture": datasets.Image(),
                "prompt": datasets.Value("string"),
                "choices": datasets.List(datasets.Value("string")),
                "label": datasets.Value("string"),
            }
        ),
    )
    expected = [
        Item(
            id="7",
            task="mcq",
            question="Colour?",
            images=["images/7.png"],
            options=["red", "blue"],
            answer=[0],
            meta={"general_type": "single"},
        ),
        Item(
            id="8",
            task="vqa.open",
            question="Which shade?",
            images=["images/8.png"],
            answer=["dark blue", "navy"],
        ),
    ]
    return ds, expected


HF_COLUMNS = formats.Columns(
    id="qid", image="picture", question="prompt", options="choices", answer="label"
)


def test_import_hf_from_a_parquet_file(tmp_path):
    ds, expected = _hf_rows(tmp_path)
    ds.to_parquet(tmp_path / "train.parquet")
    found = formats.import_hf(
        tmp_path / "train.parquet",
        tmp_path / "out",
        columns=HF_COLUMNS,
        cache_dir=tmp_path / "cache",
    )
    assert found.ok and found.images == 2, str(found)
    assert vio.load_items(tmp_path / "out") == expected
    assert vio.load_image(tmp_path / "out" / "images" / "8.png").getpixel((0, 0)) == (0, 0, 255)


def test_import_hf_from_a_save_to_disk_folder_names_columns_and_splits(tmp_path):
    import datasets

    ds, expected = _hf_rows(tmp_path)
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(tmp_path / "hf")
    with pytest.raises(ValueError, match=r"splits \['train', 'test'\]; pass --split"):
        formats.import_hf(tmp_path / "hf", tmp_path / "out", columns=HF_COLUMNS)
    with pytest.raises(
        vio.DatasetError, match=r"hf: question: no such column.*pass --question-column"
    ):
        formats.import_hf(
            tmp_path / "hf",
            tmp_path / "out",
            split="test",
            columns=formats.Columns(id="qid", image="picture"),
        )
    assert formats.import_hf(tmp_path / "hf", tmp_path / "out", split="test", columns=HF_COLUMNS).ok
    assert vio.load_items(tmp_path / "out") == expected


def test_the_command_line_exit_codes(tmp_path, capsys):
    assert main(["check", str(EXAMPLE)]) == 0
    assert capsys.readouterr().out.strip() == f"{EXAMPLE}: ok, 5 items, 3 images"
    ds = _example_copy(tmp_path)
    _answer_out_of_range(ds)
    assert main(["check", str(ds)]) == 1
    assert capsys.readouterr().out.splitlines()[0].startswith("items.jsonl:1: answer: ")
    out = tmp_path / "imported"
    assert main(["import-csv", str(EXAMPLE / "data.csv"), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"{out}: ok, 5 items, 3 images"
    assert (
        main(
            [
                "import-csv",
                str(EXAMPLE / "data.csv"),
                "--out",
                str(tmp_path / "o2"),
                "--images-root",
                "/",
            ]
        )
        == 1
    )
    assert "data.csv:2: image: no such image file /images/chelsea.png" in capsys.readouterr().out
    assert (
        main(["import-csv", str(EXAMPLE / "data.csv"), "--out", str(out)]) == 2
    )  # not empty: refused
    assert "exists and is not empty" in capsys.readouterr().err
    done = subprocess.run(
        [sys.executable, "-m", "lib.formats", "check", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        cwd=EXAMPLE.parents[1],
    )
    assert done.returncode == 1 and "items.jsonl: file: no such file" in done.stdout


# --- folder markers (lib.io.folders): one rule for "ours" ------------------------------------------


def test_a_marker_that_is_a_link_is_no_marker(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    folders.mark(theirs, "lmms-eval import")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    (mine / folders.MARKER).symlink_to(theirs / folders.MARKER)
    assert folders.kind_of(mine) is None
    with pytest.raises(folders.NotOurFolder, match=r"2 entries .*\.vqalab\.json, notes\.txt"):
        folders.check_ours(mine, "lmms-eval import")
    (mine / "notes.txt").unlink()  # a lone link is not empty either: someone put it there
    with pytest.raises(folders.NotOurFolder):
        folders.check_ours(mine, "lmms-eval import")


def test_a_legacy_folder_holds_only_its_kinds_files_and_names_its_maker(tmp_path):
    legacy = folders.Legacy(("data.json", "images"), ("*.csv",), says=("data.json", "by", "us"))
    out = tmp_path / "old"
    (out / "images").mkdir(parents=True)
    (out / "data.json").write_text('{"by": "us"}')
    (out / "t.csv").write_text("a\n")
    folders.check_ours(out, "ours", legacy)  # before markers: recognised
    (out / "notes.txt").write_text("keep")
    with pytest.raises(folders.NotOurFolder):
        folders.check_ours(out, "ours", legacy)
    (out / "notes.txt").unlink()
    (out / "data.json").write_text('{"by": "them"}')
    with pytest.raises(folders.NotOurFolder):
        folders.check_ours(out, "ours", legacy)
    (out / "data.json").unlink()
    (tmp_path / "record.json").write_text('{"by": "us"}')
    (out / "data.json").symlink_to(tmp_path / "record.json")  # a record that is a link: not ours
    with pytest.raises(folders.NotOurFolder):
        folders.check_ours(out, "ours", legacy)


def test_a_stage_folder_is_marked_and_an_unmarked_one_is_a_stage_only_where_a_run_keeps_it(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    old = tmp_path / "outputs" / "run" / "06_evaluate"  # a run's stage folder made before markers
    old.mkdir(parents=True)
    (old / "predictions.jsonl").write_text("")
    folders.claim_stage(old, "06_evaluate")
    assert folders.kind_of(old) == folders.stage_kind("06_evaluate")
    elsewhere = tmp_path / "work" / "06_evaluate"  # the same name, somewhere else: someone's
    elsewhere.mkdir(parents=True)
    (elsewhere / "predictions.jsonl").write_text("mine")
    with pytest.raises(folders.NotOurFolder, match="not a stage 06_evaluate"):
        folders.claim_stage(elsewhere, "06_evaluate")
    with pytest.raises(folders.NotOurFolder, match="holds a stage 06_evaluate"):
        folders.claim_stage(old, "07_analyze")  # another stage's folder
    assert sorted(p.name for p in elsewhere.iterdir()) == ["predictions.jsonl"]
    new = tmp_path / "work" / "new"
    folders.claim_stage(new, "07_analyze")
    assert folders.kind_of(new) == "stage 07_analyze"
