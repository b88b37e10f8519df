"""Generating Scrapbook datasets: the paper's 162 images, answers checked against the pixels,
determinism, sharding, parameter errors, background / cut-out / COCO sources."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from lib.core.schema import Item
from lib.families.scrapbook import ScrapbookParamError, ScrapbookParams, generate, merge, questions
from lib.families.scrapbook.layout import region_of
from lib.families.scrapbook.objects import vocabulary
from tests.support.scrapbook import SMALL


def test_unique_all_gives_the_papers_162_images(unique_all):
    out, stats = unique_all
    assert (
        stats["images"]
        == 162
        == len(list((out / "images").glob("*.png")))
        == len(list((out / "masks").glob("*.png")))
    )
    assert stats["placement_failures"] == {}
    assert stats["by_type"]["presence"] == stats["by_type"]["counting"]
    assert set(stats["by_level"]) == {"1", "2", "3", "4"} and set(stats["by_subgroup"]) == {
        "1",
        "2",
        "3",
        "4",
    }
    assert len(set(stats["by_form"].values())) == 1  # every question in all four forms


def _nearest_color(rgb) -> str:
    colors = vocabulary()["colors"]
    return min(colors, key=lambda c: sum((a - b) ** 2 for a, b in zip(colors[c], rgb)))


def _scene_from_pixels(folder: Path, scene: dict) -> dict:
    """Rebuild the scene's geometry and colours from the saved mask and image, not the record."""
    mask = np.asarray(Image.open(folder / scene["mask"]))
    image = np.asarray(Image.open(folder / scene["image"]).convert("RGB"))
    objects = []
    for rec in scene["objects"]:
        ys, xs = np.nonzero(mask == rec["index"] + 1)
        box = [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]
        color = _nearest_color(np.median(image[ys, xs], axis=0))
        objects.append(
            {
                **rec,
                "box": box,
                "color": color,
                "region": region_of(box, scene["width"], scene["height"]),
            }
        )
    return {**scene, "objects": objects}


def test_every_answer_agrees_with_the_pixels(unique_all):
    out, stats = unique_all
    scenes = {}
    for line in Path(out / "scenes.jsonl").read_text().splitlines():
        sc = json.loads(line)
        pixel = _scene_from_pixels(out, sc)
        assert [(o["box"], o["color"], o["region"]) for o in pixel["objects"]] == [
            (o["box"], o["color"], o["region"]) for o in sc["objects"]
        ], sc["id"]
        if sc["parent"]:
            parent = scenes[sc["parent"]]
            assert (
                len(sc["objects"]) == len(parent["objects"]) + 1
                and sc["objects"][:-1] == parent["objects"]
            )
        scenes[sc["id"]] = pixel
    n, forms = 0, Counter()
    with open(out / "items.jsonl") as f:
        for line in f:
            row = json.loads(line)
            item = Item.from_dict(row)
            m = item.meta
            truth = questions.answer(m["query"], scenes[m["image"]])
            expected = (
                "not applicable" if m["form"] == "enumerated" and truth == questions.UNK else truth
            )
            assert item.answer == [expected], item.id
            assert m["absurd"] == (truth == questions.UNK)
            assert m["subgroup"] == questions.subgroup(m["query"], scenes[m["image"]])
            if m["form"] == "enumerated":
                assert item.answer[0] in m["alternatives"]
            n += 1
            forms[m["form"]] += 1
    assert n == stats["questions"] and len(set(forms.values())) == 1


def test_same_params_and_seed_give_identical_bytes(tmp_path):
    a = generate(ScrapbookParams(**SMALL, seed=3), tmp_path / "a", progress=False)
    b = generate(ScrapbookParams(**SMALL, seed=3), tmp_path / "b", progress=False)
    assert a["questions"] == b["questions"] > 0
    for name in ("items.jsonl", "scenes.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    images = sorted(p.name for p in (tmp_path / "a" / "images").iterdir())
    assert images and all(
        (tmp_path / "a" / "images" / n).read_bytes() == (tmp_path / "b" / "images" / n).read_bytes()
        for n in images
    )
    c = generate(ScrapbookParams(**SMALL, seed=4), tmp_path / "c", progress=False)
    assert (tmp_path / "c" / "scenes.jsonl").read_bytes() != (
        tmp_path / "a" / "scenes.jsonl"
    ).read_bytes()
    assert c["images"] == a["images"]


def test_union_of_shards_equals_the_unsharded_output(tmp_path):
    params = ScrapbookParams(**SMALL)
    full = generate(params, tmp_path / "full", progress=False)
    shards = [tmp_path / f"shard{i}" for i in range(3)]
    for i, d in enumerate(shards):
        generate(params, d, shard=i, num_shards=3, progress=False)
    merged = merge(shards, tmp_path / "merged")
    assert merged["questions"] == full["questions"] and merged["by_type"] == full["by_type"]
    for name in ("items.jsonl", "scenes.jsonl", "counts.csv", "concepts.csv"):
        assert (tmp_path / "merged" / name).read_bytes() == (
            tmp_path / "full" / name
        ).read_bytes(), name
    assert sorted(p.name for p in (tmp_path / "merged" / "images").iterdir()) == sorted(
        p.name for p in (tmp_path / "full" / "images").iterdir()
    )
    with pytest.raises(ScrapbookParamError, match="given twice"):
        merge([shards[0], shards[1], shards[1]], tmp_path / "dup")
    other = generate(
        ScrapbookParams(**{**SMALL, "seed": 9}),
        tmp_path / "other",
        shard=2,
        num_shards=3,
        progress=False,
    )
    assert other["images"] > 0
    with pytest.raises(ScrapbookParamError, match=r"other parameters .*\(seed differ\)"):
        merge([shards[0], shards[1], tmp_path / "other"], tmp_path / "mixed")
    assert (
        not (tmp_path / "dup").exists() and not (tmp_path / "mixed").exists()
    )  # refused before writing


def test_regenerating_over_a_folder_swaps_a_complete_build_in(tmp_path, monkeypatch):
    """A run killed while regenerating (its question-lines worker still busy) leaves the old
    dataset whole; a finished one replaces it."""
    generate_module = sys.modules[
        "lib.families.scrapbook.generate"
    ]  # the module (lib.families.scrapbook.generate is also the function)

    out = tmp_path / "ds"
    first = generate(ScrapbookParams(**SMALL), out, progress=False)
    before = (out / "items.jsonl").read_bytes()
    real = generate_module.build_unit
    units = []

    def killed(
        *a, **k
    ):  # the run is killed at its third unit, the question-lines worker still busy
        units.append(a[1])
        if len(units) == 3:
            raise KeyboardInterrupt("killed mid-way")
        return real(*a, **k)

    monkeypatch.setattr(generate_module, "build_unit", killed)
    with pytest.raises(KeyboardInterrupt):
        generate(ScrapbookParams(**{**SMALL, "seed": 5}), out, progress=False, question_worker=True)
    assert (out / "items.jsonl").read_bytes() == before and len(
        list((out / "images").iterdir())
    ) == first["images"]
    monkeypatch.setattr(generate_module, "build_unit", real)
    generate(ScrapbookParams(**{**SMALL, "seed": 5}), out, progress=False)
    assert (out / "items.jsonl").read_bytes() != before
    assert json.loads((out / "summary.json").read_text())["params"]["seed"] == 5
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # nothing left aside


def test_a_failure_making_question_lines_is_raised_with_its_traceback_and_leaves_nothing(
    tmp_path, monkeypatch
):
    """With ``question_worker`` the question lines are made by a worker process (QuestionLines): its
    error reaches the caller with the file and the worker's traceback, and the half-built folder is
    removed."""
    generate_module = sys.modules["lib.families.scrapbook.generate"]
    real = generate_module.item_jsonl

    def broken(scene, *a, **k):
        if scene["id"].endswith("_x2"):
            raise ValueError(f"no lines for {scene['id']}")
        return real(scene, *a, **k)

    monkeypatch.setattr(generate_module, "item_jsonl", broken)
    with pytest.raises(
        RuntimeError,
        match=r"(?s)items\.jsonl.*failed in the worker.*ValueError: no lines for s0_b0_a\d_p\d_x2",
    ):
        generate(ScrapbookParams(**SMALL), tmp_path / "ds", progress=False, question_worker=True)
    assert list(tmp_path.iterdir()) == []


def test_question_lines_are_the_same_bytes_made_here_by_a_worker_or_here_where_none_can_be_forked(
    tmp_path, monkeypatch
):
    generate_module = sys.modules["lib.families.scrapbook.generate"]
    forks, real_process = [], generate_module.multiprocessing.get_context("fork").Process

    def counted(*a, **k):
        forks.append(k.get("name"))
        return real_process(*a, **k)

    monkeypatch.setattr(generate_module.multiprocessing.get_context("fork"), "Process", counted)
    plain = generate(ScrapbookParams(**SMALL), tmp_path / "plain", progress=False)
    assert forks == []  # plainly, unless asked
    forked = generate(
        ScrapbookParams(**SMALL), tmp_path / "forked", progress=False, question_worker=True
    )
    assert forks == ["scrapbook-questions"]
    monkeypatch.setattr(generate_module.multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    inline = generate(
        ScrapbookParams(**SMALL), tmp_path / "inline", progress=False, question_worker=True
    )
    assert forks == ["scrapbook-questions"] and plain == forked == inline
    for name in ("items.jsonl", "dataset.json", "counts.csv", "concepts.csv"):
        for other in ("forked", "inline"):
            a, b = (tmp_path / "plain" / name).read_bytes(), (tmp_path / other / name).read_bytes()
            assert (
                a == b or name == "dataset.json" and _without_created(a) == _without_created(b)
            ), (name, other)


def _without_created(manifest: bytes) -> dict:
    return {k: v for k, v in json.loads(manifest).items() if k != "created"}


@pytest.mark.parametrize(
    "change, name",
    [
        ({"objects_per_image": 6}, "objects_per_image"),
        ({"n_region_pairs": 82}, "n_region_pairs"),
        ({"colors": ["red", "teal"]}, "colors"),
        ({"shapes": ["circle", "star"]}, "shapes"),
        ({"n_backgrounds": 5}, "n_backgrounds"),  # 9 colours - 5 used leaves 4 plain backgrounds
        ({"objects_per_set": 8, "class_selection": "random"}, "objects_per_set"),  # a 350 px object
        ({"backgrounds": "/nonexistent/folder"}, "backgrounds"),
    ],
)
def test_invalid_parameters_fail_before_generating_naming_the_parameter(tmp_path, change, name):
    params = ScrapbookParams(**{**dict(objects_per_set=5), **change})
    with pytest.raises(ScrapbookParamError, match=name):
        generate(params, tmp_path / "out", progress=False)
    assert (
        not list((tmp_path / "out").glob("**/*.png"))
        and not (tmp_path / "out" / "items.jsonl").exists()
    )


def test_unknown_parameter_name_is_refused():
    with pytest.raises(ScrapbookParamError, match="n_set"):
        ScrapbookParams.from_dict({"n_set": 2}, source="my.yaml")


def test_background_folder_reports_unreadable_and_small_files_by_name(tmp_path):
    folder = tmp_path / "bgs"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        Image.fromarray(rng.integers(0, 256, (600, 640, 3), dtype=np.uint8)).save(
            folder / f"ok{i}.jpg"
        )
    Image.new("RGB", (300, 300)).save(folder / "small.png")
    (folder / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(ScrapbookParamError, match=r"n_backgrounds=3.*only 2 usable"):
        generate(
            ScrapbookParams(**{**SMALL, "n_backgrounds": 3, "backgrounds": str(folder)}),
            tmp_path / "x",
            progress=False,
        )
    stats = generate(
        ScrapbookParams(**{**SMALL, "n_backgrounds": 2, "backgrounds": str(folder)}),
        tmp_path / "y",
        progress=False,
    )
    skipped = {Path(p).name for p, _ in stats["skipped_files"]}
    assert skipped == {"small.png", "broken.jpg"} and stats["images"] > 0


def _cutouts(folder: Path, classes: list[str]):
    for i, name in enumerate(classes):
        d = folder / name.replace(" ", "_")
        d.mkdir(parents=True)
        sprite = Image.new("RGBA", (80 + 10 * i, 60 + 10 * i), (40 * i, 100, 200, 0))
        sprite.paste((40 * i, 100, 200, 255), (5, 5, 70 + 10 * i, 55 + 10 * i))
        sprite.save(d / "a.png")


def test_cutout_folder_objects_and_unreadable_file_reported(tmp_path, capsys):
    _cutouts(tmp_path / "cut", ["dog", "cat", "bus", "traffic light"])
    (tmp_path / "cut" / "dog" / "bad.png").write_bytes(b"")
    stats = generate(
        ScrapbookParams(**{**SMALL, "objects": "cutouts", "cutouts_dir": str(tmp_path / "cut")}),
        tmp_path / "out",
        progress=False,
    )
    assert "bad.png" in capsys.readouterr().out
    kinds = {o["shape"] for s in stats["sets"] for o in s}
    assert kinds <= {"dog", "cat", "bus", "traffic light"} and stats["images"] > 0
    row = json.loads(Path(tmp_path / "out" / "items.jsonl").read_text().splitlines()[0])
    assert "color" not in row["meta"]["query"]["target"]


def _coco_fixture(root: Path) -> tuple[Path, Path]:
    """Two images and instances JSON: five usable classes, one too small, one on the border."""
    images = root / "val2017"
    images.mkdir(parents=True)
    rng = np.random.default_rng(0)
    anns, cats = (
        [],
        [
            {"id": i + 1, "name": n, "supercategory": "x"}
            for i, n in enumerate(["dog", "cat", "bus", "bicycle", "toilet", "person"])
        ],
    )
    boxes = [
        (1, 1, 50, 60, 100),
        (2, 2, 200, 50, 90),
        (3, 1, 350, 60, 120),
        (4, 2, 60, 250, 80),
        (5, 1, 300, 250, 70),
        (1, 2, 400, 300, 30),  # too small (30 px)
        (2, 1, 0, 300, 100),
    ]  # touches the left border
    for img_id in (1, 2):
        Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)).save(
            images / f"{img_id:012d}.jpg"
        )
    for k, (cat, img, x, y, s) in enumerate(boxes):
        anns.append(
            {
                "id": k + 1,
                "image_id": img,
                "category_id": cat,
                "iscrowd": 0,
                "area": s * s,
                "bbox": [x, y, s, s],
                "segmentation": [[x, y, x + s, y, x + s, y + s, x, y + s]],
            }
        )
    ann = root / "instances.json"
    ann.write_text(
        json.dumps(
            {
                "images": [
                    {"id": i, "file_name": f"{i:012d}.jpg", "width": 640, "height": 480}
                    for i in (1, 2)
                ],
                "annotations": anns,
                "categories": cats,
            }
        )
    )
    return images, ann


@pytest.mark.parametrize("backgrounds", ["plain", "samples"])  # coco_plain_bg and coco profiles
def test_coco_objects_with_the_papers_filters(tmp_path, monkeypatch, backgrounds):
    monkeypatch.setenv("VQALAB_OUTPUTS", str(tmp_path / "outputs"))
    images, ann = _coco_fixture(tmp_path / "coco")
    params = ScrapbookParams(
        **{
            **SMALL,
            "objects_per_set": 5,
            "objects": "coco",
            "coco_images": str(images),
            "coco_annotations": str(ann),
            "backgrounds": backgrounds,
        }
    )
    stats = generate(params, tmp_path / "out", progress=False)
    cutouts = json.loads(
        (tmp_path / "outputs" / "cache" / "scrapbook" / "coco_cutouts" / "cutouts.json").read_text()
    )
    assert sorted(cutouts) == [
        "bicycle",
        "bus",
        "cat",
        "dog",
        "toilet",
    ]  # person is not among the 59 classes
    assert [len(v) for v in cutouts.values()] == [
        1,
        1,
        1,
        1,
        1,
    ]  # the small and the border objects are dropped
    assert stats["images"] > 0 and stats["by_type"]["presence"] == stats["by_type"]["counting"]


def test_cli_generates_and_reports_bad_params(tmp_path):
    good = tmp_path / "p.yaml"
    good.write_text(yaml.safe_dump(SMALL))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "lib.stages.scrapbook",
            "--params",
            str(good),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    dataset = (
        tmp_path / "o" / "datasets" / "scrapbook"
    )  # the stage's layout, as notebook 04 writes it
    assert json.loads(r.stdout)["images"] == len(list((dataset / "images").iterdir()))
    written = {p.name for p in (tmp_path / "o").iterdir()}
    assert {"provenance.json", "summary.json", "figures", "datasets"} <= written
    # a stage file with the stage's own keys (n_preview, question_worker) shards as the stage reads it
    staged = tmp_path / "stage.yaml"
    staged.write_text(yaml.safe_dump({**SMALL, "n_preview": 2, "question_worker": True}))
    shards = [
        subprocess.run(
            [
                sys.executable,
                "-m",
                "lib.stages.scrapbook",
                "shard",
                "--params",
                str(staged),
                "--out",
                str(tmp_path / f"s{i}"),
                "--shard",
                str(i),
                "--num-shards",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        for i in range(2)
    ]
    assert all(s.returncode == 0 for s in shards), [s.stderr for s in shards]
    assert (
        0 < json.loads(shards[0].stdout)["images"] < json.loads(r.stdout)["images"]
    )  # a shard: the dataset folder only
    merged = subprocess.run(
        [
            sys.executable,
            "-m",
            "lib.stages.scrapbook",
            "merge",
            "--out",
            str(tmp_path / "m"),
            str(tmp_path / "s0"),
            str(tmp_path / "s1"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert merged.returncode == 0, merged.stderr
    assert (tmp_path / "m" / "items.jsonl").read_bytes() == (dataset / "items.jsonl").read_bytes()
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**SMALL, "objects_per_image": 9}))
    for command in (
        [],
        ["shard", "--shard", "0", "--num-shards", "2"],
    ):  # the stage, and one shard of its dataset
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "lib.stages.scrapbook",
                *command,
                "--params",
                str(bad),
                "--out",
                str(tmp_path / "b"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 2 and "objects_per_image=9" in r.stderr, (command, r.stderr)


def test_sample_photographs_as_backgrounds(tmp_path):
    stats = generate(
        ScrapbookParams(**{**SMALL, "n_backgrounds": 2, "backgrounds": "samples"}),
        tmp_path / "o",
        progress=False,
    )
    scenes = [
        json.loads(line) for line in Path(tmp_path / "o" / "scenes.jsonl").read_text().splitlines()
    ]
    assert {Path(s["background"]).stem for s in scenes} <= {
        "astronaut",
        "hubble_deep_field",
        "immunohistochemistry",
        "camera",
    }
    first = Image.open(tmp_path / "o" / scenes[0]["image"])
    assert (
        first.size == tuple(vocabulary()["canvas"]) and len(set(first.getdata())) > 1000
    )  # a photograph
    assert stats["images"] == len(scenes)


def test_canvas_sizes_and_question_filters(tmp_path):
    params = ScrapbookParams(
        **{
            **SMALL,
            "canvas": [224, 224],
            "size_start": 40,
            "size_step": 10,
            "types": ["presence"],
            "groups": ["np"],
            "forms": ["original", "enumerated"],
        }
    )
    stats = generate(params, tmp_path / "o", progress=False)
    assert set(stats["by_type"]) == {"presence"} and set(stats["by_group"]) == {"np"}
    assert set(stats["by_form"]) == {"original", "enumerated"}
    scene = json.loads(Path(tmp_path / "o" / "scenes.jsonl").read_text().splitlines()[0])
    assert (scene["width"], scene["height"]) == (224, 224) and scene["objects"][0]["size"] == 40
    assert Image.open(tmp_path / "o" / scene["image"]).size == (224, 224)
    with pytest.raises(ScrapbookParamError, match="types"):
        ScrapbookParams(types=["presence", "colour"]).validate()


def test_placement_draws_the_boxes_randint_would():
    """Placer.place inlines its draws and checks for speed: the boxes must be those of drawing
    ``randint`` x then y and checking region share, overlaps and ``check`` in turn."""
    import random

    from lib.families.scrapbook.layout import Placer, inside_fraction, overlaps

    def reference(rng, W, H, w, h, others, region, check, tries=400, margin=4):  # noqa: N803, N806 - the canvas W x H beside an object's w x h
        if w > W or h > H:
            return None
        if region is None:
            lo = (0, W - w, 0, H - h)
        else:
            lo = (
                max(0, region[0] - w // 4),
                min(W - w, region[2] - 3 * w // 4),
                max(0, region[1] - h // 4),
                min(H - h, region[3] - 3 * h // 4),
            )
            if lo[0] > lo[1] or lo[2] > lo[3]:
                return None
        for _ in range(tries):
            x, y = rng.randint(lo[0], lo[1]), rng.randint(lo[2], lo[3])
            box = (x, y, x + w, y + h)
            if region is not None and inside_fraction(box, region) < 0.75:
                continue
            if any(overlaps(box, o, margin) for o in others) or (
                check is not None and not check(box)
            ):
                continue
            return box
        return None

    cases = random.Random(0)
    for case in range(300):
        W, H = cases.choice([(168, 168), (1280, 768)])  # noqa: N803, N806 - the canvas W x H beside an object's w x h
        w, h = cases.randint(10, W // 2), cases.randint(10, H // 2)
        others = [
            (x, y, x + cases.randint(5, 90), y + cases.randint(5, 90))
            for x, y in (
                (cases.randint(0, W - 90), cases.randint(0, H - 90))
                for _ in range(cases.randint(0, 4))
            )
        ]
        region = cases.choice([None, (0, 0, W // 2, H // 2), (W // 3, H // 3, W, H)])
        check = cases.choice([None, lambda b: b[0] < b[1]])
        a, b = random.Random(case), random.Random(case)
        got = [Placer(W, H, a).place(w, h, others, region, check) for _ in range(3)]
        assert got == [reference(b, W, H, w, h, others, region, check) for _ in range(3)]
        assert a.random() == b.random()  # and the same number of draws
