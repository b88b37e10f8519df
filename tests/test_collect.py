"""Collection: the manifest, bad files, duplicates, stable ids, and the YesBut layout on real data."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lib.families.yesbut import figures
from lib.families.yesbut.collect import collect_yesbut
from lib.families.yesbut.paper import figure3_counts
from lib.families.yesbut.release import read_yesbut_annotations
from lib.io import duplicates
from lib.io.records import record_for
from lib.stages import collect

from .support.data import SHARED_DATA

YESBUT = SHARED_DATA / "yesbut"


def test_folder_reports_bad_files_and_removes_duplicates_by_one_rule(tmp_path, images):
    folder = tmp_path / "src"
    (folder / "sub").mkdir(parents=True)
    for i, p in enumerate(images):
        shutil.copy(p, folder / f"{i}.png")
    shutil.copy(images[0], folder / "sub" / "copy.png")  # exact copy
    _scene("red", folder / "scene.png")
    Image.open(folder / "scene.png").resize((300, 150)).save(
        folder / "sub" / "resized.jpg", quality=90
    )  # near copy
    (folder / "empty.png").write_bytes(b"")
    (folder / "notes.txt").write_text("not an image")
    (folder / "broken.jpg").write_bytes(Image.open(images[2]).tobytes()[:100])
    recs, report = collect.collect_folder(folder, progress=False)
    assert len(recs) == 7 and {p.split("/")[-1] for p, _ in report.skipped} == {
        "empty.png",
        "notes.txt",
        "broken.jpg",
    }
    kept, dropped = duplicates.deduplicate(recs, near=6)
    by_path = {d["path"].split("/")[-1]: d for d in dropped}
    assert set(by_path) == {"copy.png", "resized.jpg"}
    assert by_path["copy.png"]["kind"] == "exact" and by_path["resized.jpg"]["kind"] == "near"
    assert by_path["copy.png"]["duplicate_of"] == next(
        r.id for r in recs if r.path.endswith("/0.png")
    )
    assert (
        by_path["resized.jpg"]["duplicate_path"].endswith("/scene.png")
        and max(by_path["resized.jpg"]["pixel_difference"]) < 12
    )
    assert len(kept) == 5


def _scene(light: str, path, style_right: str = "photo"):
    """A two-panel drawing: a street on the left, a traffic light on the right (its colour given)."""
    from PIL import ImageDraw

    im = Image.new("RGB", (400, 200), (200, 200, 190))
    d = ImageDraw.Draw(im)
    d.rectangle((20, 120, 180, 180), fill=(60, 60, 60))
    d.rectangle((300, 30, 340, 150), fill=(20, 20, 20))
    d.ellipse(
        (305, 40 if light == "red" else 110, 335, 70 if light == "red" else 140),
        fill=(230, 30, 30) if light == "red" else (30, 200, 60),
    )
    if style_right == "stick":
        d.line((250, 60, 250, 190), fill=(0, 0, 0), width=3)
    im.save(path)
    return path


def test_a_perceptual_hash_match_is_only_a_candidate(tmp_path):
    red, green = _scene("red", tmp_path / "red.png"), _scene("green", tmp_path / "green.png")
    recs = [record_for(p, "folder") for p in (red, green)]
    kept, dropped = duplicates.deduplicate(recs, near=64)  # every pair is a hash candidate
    assert len(kept) == 2 and dropped == []  # the pixels of the right half tell them apart
    assert max(duplicates.pixel_difference(str(red), str(green))) > duplicates.PIXEL_BLOCK_TOLERANCE


def test_other_labels_and_style_variants_are_never_duplicates(tmp_path):
    a = record_for(
        _scene("red", tmp_path / "a.png"),
        "yesbut",
        label="satirical",
        timestamp="t1",
        left_style="ORIG",
        right_style="ORIG",
    )
    copy = tmp_path / "b.jpg"
    Image.open(a.path).save(copy, quality=90)
    other_label = record_for(
        copy, "yesbut", label="non_satirical", timestamp="t2", left_style="ORIG", right_style="ORIG"
    )
    variant = record_for(
        copy, "yesbut", label="satirical", timestamp="t1", left_style="ORIG", right_style="STICK"
    )
    same = record_for(
        copy, "yesbut", label="satirical", timestamp="t3", left_style="ORIG", right_style="ORIG"
    )
    kept, dropped = duplicates.deduplicate([a, other_label, variant, same], near=8)
    assert [d["path"] for d in dropped] == [same.path] and len(kept) == 3


def test_recollecting_a_changed_source_drops_and_lists_stale_records(tmp_path, images):
    folder = tmp_path / "src"
    folder.mkdir()
    for i in range(3):
        shutil.copy(images[i], folder / f"{i}.png")
    cfg = collect.CollectConfig(
        sources=[{"kind": "folder", "path": str(folder)}], manifest_datasets=False
    )
    out = tmp_path / "01"
    collect.run(cfg, out)
    (folder / "2.png").unlink()
    summary = collect.run(cfg, out)
    manifest = [json.loads(line) for line in Path(out / "manifest.jsonl").read_text().splitlines()]
    report = json.loads((out / "report.json").read_text())
    assert (
        summary["manifest"] == len(manifest) == 2 and summary["removed_since_last_collection"] == 1
    )
    assert [r["path"] for r in report["removed_since_last_collection"]] == [str(folder / "2.png")]
    assert {r["path"] for r in manifest} == {str(folder / "0.png"), str(folder / "1.png")}


def test_a_generated_image_without_its_original_is_named(tmp_path):
    root = tmp_path / "yesbut"
    (root / "images" / "stage_2").mkdir(parents=True)
    gen = root / "images" / "stage_3_and_4" / "yesbut_stage_3_satirical"
    gen.mkdir(parents=True)
    _scene("red", root / "images" / "stage_2" / "111.png")
    _scene("red", gen / "111_ORIG_YES_STICK_BUT.png", "stick")
    _scene("green", gen / "222_ORIG_YES_STICK_BUT.png", "stick")
    recs, report = collect_yesbut(root, progress=False)
    orphan = next(r for r in recs if r.timestamp == "222")
    assert (
        orphan.original is None
        and next(r for r in recs if r.timestamp == "111" and r.stage == 3).original
    )
    assert [(p.split("/")[-1], "222" in why) for p, why in report.notes] == [
        ("222_ORIG_YES_STICK_BUT.png", True)
    ]


def test_ids_are_stable_and_adding_images_keeps_them(tmp_path, images):
    folder = tmp_path / "src"
    folder.mkdir()
    shutil.copy(images[0], folder / "a.png")
    first, _ = collect.merge_manifest([], collect.collect_folder(folder, progress=False)[0])
    again, _ = collect.merge_manifest([], collect.collect_folder(folder, progress=False)[0])
    assert first == again
    shutil.copy(images[1], folder / "0-new.png")  # sorts before a.png
    later, removed = collect.merge_manifest(
        first, collect.collect_folder(folder, progress=False)[0]
    )
    assert later[0] == first[0] and len(later) == 2 and removed == []


def test_urls_offline_fail_clearly(tmp_path):
    recs, report = collect.collect_urls(
        ["http://127.0.0.1:9/none.png"], tmp_path, retries=2, timeout_s=1, progress=False
    )
    assert recs == [] and "download failed after 2 attempts" in report.skipped[0][1]


def test_demo_collection_has_photographs_and_labelled_pairs(tmp_path):
    recs, report = collect.collect_demo(tmp_path, progress=False)
    assert not report.skipped and len({r.source for r in recs}) == 2
    pairs = [r for r in recs if r.source == "demo-pairs"]
    assert len(pairs) == 5 and {r.label for r in pairs} == {"satirical", "non_satirical"}
    assert all(r.licence != "unknown" for r in recs)


@pytest.mark.needs_data("yesbut")
def test_yesbut_layout_labels_styles_links_and_annotations():
    recs, report = collect_yesbut(YESBUT, progress=False)
    stage2 = [r for r in recs if r.stage == 2]
    gen = [r for r in recs if r.stage in (3, 4)]
    assert len(stage2) == 283 and len(gen) == 160
    assert report.loaded == len(recs) and all(
        why for _, why in report.skipped
    )  # anything odd is named, with a reason
    for r in gen:
        folder = r.path.split("/")[-2]
        assert folder == f"yesbut_stage_{r.stage}_{r.label}"
        assert r.path.split("/")[-1].startswith(
            f"{r.timestamp}_{r.left_style}_YES_{r.right_style}_BUT"
        )
        if r.original:
            assert r.annotation == next(o.annotation for o in stage2 if o.id == r.original)
    assert (
        sum(r.original is not None for r in gen) > 100
    )  # generated images link to their originals
    assert all(r.annotation for r in stage2)


@pytest.mark.needs_data("yesbut")
def test_figure3_counts_match_the_annotation_csv():
    import pandas as pd

    raw = pd.read_csv(YESBUT / "YesBut_Stage2_Annotation.csv")
    table = pd.DataFrame(read_yesbut_annotations(YESBUT / "YesBut_Stage2_Annotation.csv").values())
    counts = figure3_counts(table)
    assert counts["difficulty"].to_dict() == {"EASY": 245, "MEDIUM": 31, "HARD": 7}
    assert (
        counts["difficulty"].to_dict()
        == raw["difficulty_in_understanding"].value_counts().to_dict()
    )
    left = raw["is_text_in_left_image"].astype(str).str.upper() == "TRUE"
    right = raw["is_text_in_right_image"].astype(str).str.upper() == "TRUE"
    assert counts["text_in_image"]["both halves"] == int((left & right).sum())
    assert counts["text_in_image"]["no text"] == int((~left & ~right).sum())
    assert counts["connected"]["connected"] == int(
        (raw["are_images_connected"].astype(str).str.upper() == "TRUE").sum()
    )


def test_hugging_face_offline_fails_fast_naming_the_dataset(tmp_path):
    import time

    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="some-org/memes.*network"):
        collect.collect_hf("some-org/memes", tmp_path, progress=False)
    assert time.perf_counter() - start < 30


def test_each_bad_url_is_reported_with_its_reason_and_the_good_ones_kept(tmp_path):
    """A real HTTP server on 127.0.0.1: an image, a soft 404 (HTML with status 200), a hard 404;
    a URL without a scheme and a file:// URL are refused before any download."""
    import functools
    import http.server
    import threading

    served = tmp_path / "www"
    served.mkdir()
    Image.new("RGB", (40, 30), "green").save(served / "ok.png")
    (served / "soft404.png").write_text("<html>Not found, but 200</html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        urls = [
            f"{base}/ok.png",
            f"{base}/soft404.png",
            f"{base}/missing.png",
            "no-scheme/cat.png",
            f"file://{served / 'ok.png'}",
        ]
        recs, report = collect.collect_urls(
            urls, tmp_path / "dl", retries=1, timeout_s=5, progress=False
        )
    finally:
        server.shutdown()
    assert [r.url for r in recs] == [f"{base}/ok.png"] and recs[0].width == 40
    why = dict(report.skipped)
    assert "not an image" in why[f"{base}/soft404.png"] and "404" in why[f"{base}/missing.png"]
    assert (
        "scheme missing" in why["no-scheme/cat.png"]
        and "scheme 'file'" in why[f"file://{served / 'ok.png'}"]
    )
    assert len(list((tmp_path / "dl").iterdir())) == 1  # the HTML page is not kept as an image


def test_a_relative_source_path_collects_into_datasets_stage_06_can_read(tmp_path, monkeypatch):
    from lib.eval.items import load_eval_items
    from lib.stages import evaluate

    root = tmp_path / "project" / "yesbut"
    (root / "images" / "stage_2").mkdir(parents=True)
    gen = root / "images" / "stage_3_and_4" / "yesbut_stage_3_non_satirical"
    gen.mkdir(parents=True)
    _scene("red", root / "images" / "stage_2" / "111.png")
    _scene("green", gen / "111_ORIG_YES_STICK_BUT.png", "stick")
    monkeypatch.chdir(
        tmp_path / "project"
    )  # the source given relative to the project, as params files do
    out = tmp_path / "runs" / "01_collect"
    collect.run(collect.CollectConfig(sources=[{"kind": "yesbut", "path": "yesbut"}]), out)
    manifest = [json.loads(line) for line in Path(out / "manifest.jsonl").read_text().splitlines()]
    assert all(r["path"].startswith("/") for r in manifest)
    monkeypatch.chdir(tmp_path)  # a later stage, run from elsewhere
    loaded = load_eval_items(
        evaluate.EvalConfig(datasets={"yesbut": str(out / "datasets" / "yesbut")})
    )
    folder, items = loaded["yesbut"]
    assert {it.task for it in items} == {"yesbut.detection"} and len(items) == 2


def test_images_that_are_not_two_panels_are_flagged_by_name_and_never_cut(tmp_path):
    from lib.families.yesbut import panels

    root = tmp_path / "yesbut"
    (root / "images" / "stage_2").mkdir(parents=True)
    _scene("red", root / "images" / "stage_2" / "111.png")
    a, b, c = (
        Image.fromarray(np.random.default_rng(k).integers(0, 256, (200, 200, 3), dtype=np.uint8))
        for k in range(3)
    )
    panels.compose(panels.compose(a, b, gutter=8), c, gutter=8).save(
        root / "images" / "stage_2" / "333.png"
    )  # three panels
    out = tmp_path / "run" / "01_collect"
    collect.run(collect.CollectConfig(sources=[{"kind": "yesbut", "path": str(root)}]), out)
    manifest = {
        r["name"]: r for r in map(json.loads, Path(out / "manifest.jsonl").read_text().splitlines())
    }
    assert manifest["111"]["layout"]["panels"] == 2 and manifest["333"]["layout"]["panels"] == 3
    report = json.loads((out / "report.json").read_text())
    assert [(f["path"].split("/")[-1], f["panels"]) for f in report["not_verified_two_panels"]] == [
        ("333.png", 3)
    ]
    info = json.loads((out / "datasets" / "yesbut" / "dataset.json").read_text())
    assert info["provenance"]["three_panels_not_cut"] == [manifest["333"]["id"]]
    fig, axes = figures.panel_cuts(list(manifest.values()))
    titles = [ax.get_title() for ax in axes.flat if ax.get_title()]
    assert titles[0].startswith("333") and "three panels" in titles[0] and "two panels" in titles[1]


def _same_text(a, b, folder_a, folder_b) -> bool:
    """Two files alike once the folder each run wrote into is named the same."""
    return a.read_text().replace(str(folder_a), str(folder_b)) == b.read_text()


def test_the_stage_steps_called_one_by_one_write_what_run_writes(tmp_path):
    """Notebook 01 calls the steps one per section; ``run`` composes the same steps."""
    cfg = collect.CollectConfig(sources=[{"kind": "demo"}])
    a, b = tmp_path / "steps" / "01_collect", tmp_path / "run" / "01_collect"
    a.mkdir(parents=True)
    records, found = collect.gather_sources(cfg, a)
    assert (
        len(records) == sum(s["images"] for s in found["per_source"]) > 0
        and found["bad_files"] == []
    )
    manifest, report = collect.build_manifest(cfg, a, records, found)
    assert report["collected"] == len(records) and len(manifest) == report["kept"]
    fig, ax = collect.sample_figure(a, manifest)
    assert fig.axes and (a / "figures" / "sample.png").exists()
    folders = collect.datasets(cfg, a, manifest)
    assert (
        set(folders) == {"yesbut"} and (folders["yesbut"] / "items.jsonl").exists()
    )  # the demo's pairs are labelled
    summary = collect.finish(cfg, a, manifest, report, folders)
    assert json.dumps(summary).replace(str(a), str(b)) == json.dumps(collect.run(cfg, b))
    for name in ("manifest.jsonl", "report.json", "summary.json", "datasets/yesbut/items.jsonl"):
        assert _same_text(a / name, b / name, a, b), name
    assert sorted(p.relative_to(a) for p in a.rglob("*")) == sorted(
        p.relative_to(b) for p in b.rglob("*")
    )
