"""Images that leak: planted copies (resized, recompressed, cropped, mirrored, recoloured) found
across splits; different images of one Scrapbook scene not reported unless one is a copy; and the
questions repeated on a copied image."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps
from skimage import data

from lib.core.schema import Item
from lib.items.leaks import CROP, image_leaks, repeated_questions

ORIGINALS = ("astronaut", "chelsea", "coffee", "rocket")


def _jpeg(image: Image.Image, quality: int = 30) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def _hue(image: Image.Image, turn: float = 0.33) -> Image.Image:
    hsv = np.asarray(image.convert("HSV")).copy()
    hsv[..., 0] = (hsv[..., 0].astype(int) + round(turn * 256)) % 256
    return Image.fromarray(hsv, "HSV").convert("RGB")


def _crop(image: Image.Image, corner: bool) -> Image.Image:
    w, h = image.size
    cw, ch = round(w * CROP), round(h * CROP)
    left, top = (w - cw, h - ch) if corner else ((w - cw) // 2, (h - ch) // 2)
    return image.crop((left, top, left + cw, top + ch))


EDITS = {
    "resized": (lambda im: im.resize((im.width // 2, im.height // 2)), "near"),
    "jpeg30": (_jpeg, "near"),
    "cropped": (lambda im: _crop(im, corner=False), "cropped"),
    "cropped_corner": (lambda im: _crop(im, corner=True), "cropped"),
    "mirrored": (ImageOps.mirror, "mirrored"),
    "recoloured": (_hue, "recoloured"),
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """train: four photographs; dev: every edit of the first two, and two untouched others."""
    root = tmp_path_factory.mktemp("leaks")
    originals = {n: Image.fromarray(getattr(data, n)()).convert("RGB") for n in ORIGINALS}
    train = []
    for name, image in originals.items():
        image.save(root / f"{name}.png")
        train.append(root / f"{name}.png")
    dev, expected = [], {}
    for name in ORIGINALS[:2]:
        for edit, (make, kind) in EDITS.items():
            path = root / f"{name}_{edit}.png"
            make(originals[name]).save(path)
            dev.append(path)
            expected[(str(root / f"{name}.png"), str(path))] = kind
    for name in ("camera", "coins"):  # photographs no train image is a copy of
        Image.fromarray(getattr(data, name)()).convert("RGB").save(root / f"{name}.png")
        dev.append(root / f"{name}.png")
    return {"train": train, "dev": dev}, expected


def test_planted_copies_are_found_across_splits_with_their_kind(planted):
    named, expected = planted
    pairs = image_leaks(named)
    across = pairs[pairs["scope"] == "across"]
    found = {(min(r.a, r.b), max(r.a, r.b)): r.kind for r in across.itertuples()}
    assert found == {(min(a, b), max(a, b)): kind for (a, b), kind in expected.items()}
    assert across["distance"].le(4).all() and across["difference"].le(6).all()


def test_two_edits_of_one_photograph_in_one_split_are_a_pair_within_it(planted):
    named, _ = planted
    within = image_leaks(named).query("scope == 'within'")
    names = {(r.a.rsplit("/", 1)[-1], r.b.rsplit("/", 1)[-1]) for r in within.itertuples()}
    assert ("astronaut_resized.png", "astronaut_jpeg30.png") in names | {b[::-1] for b in names}
    assert not any(n[0].startswith("astronaut") != n[1].startswith("astronaut") for n in names)


def test_exact_copies_are_reported_as_exact(planted, tmp_path):
    named, _ = planted
    copy = tmp_path / "copy.png"
    copy.write_bytes(named["train"][0].read_bytes())
    pairs = image_leaks({"train": named["train"], "other dataset": [copy]})
    assert pairs[["kind", "distance", "scope"]].values.tolist() == [["exact", 0, "across"]]


@pytest.fixture(scope="module")
def scrapbook(tmp_path_factory):
    """A small Scrapbook set on photographs: each image's siblings show its scene with one object
    more or less, and hash 0 bits apart from it."""
    from lib.families.scrapbook.generate import generate
    from lib.families.scrapbook.params import ScrapbookParams
    from tests.support.scrapbook import SMALL

    out = tmp_path_factory.mktemp("scrapbook") / "set"
    generate(ScrapbookParams(**SMALL, backgrounds="samples"), out, progress=False)
    return sorted((out / "images").glob("*.png"))


@pytest.mark.slow
def test_images_of_one_scrapbook_scene_are_not_copies_but_a_recompressed_one_is(
    scrapbook, tmp_path
):
    assert not len(image_leaks({"scrapbook": scrapbook}))
    copy = tmp_path / "copy.png"
    _jpeg(Image.open(scrapbook[4]).convert("RGB"), quality=50).save(copy)
    pairs = image_leaks({"scrapbook": scrapbook, "elsewhere": [copy]})
    assert [({r.a, r.b}, r.kind) for r in pairs.itertuples()] == [
        ({str(scrapbook[4]), str(copy)}, "near")
    ]


def _item(n: str, image: str, question: str) -> Item:
    return Item(id=n, task="vqa", question=question, images=[image], answer=["x"])


def test_a_question_repeated_on_a_copied_image_is_reported(planted):
    named, _ = planted
    root = named["train"][0].parent
    train = [
        _item("t1", "astronaut.png", "Who is in the picture?"),
        _item("t2", "coffee.png", "Why?"),
    ]
    dev = [
        _item("d1", "astronaut_mirrored.png", "who is in the  picture"),  # a copy, same question
        _item("d2", "astronaut_mirrored.png", "What is she holding?"),  # a copy, new question
        _item("d3", "camera.png", "Who is in the picture?"),  # same question, another image
        _item("d4", "coffee.png", "Why?"),  # the very same file
    ]
    pairs = image_leaks(named)
    found = repeated_questions({"train": train, "dev": dev}, {"train": root, "dev": root}, pairs)
    assert sorted(map(tuple, found[["item_a", "item_b", "kind"]].values.tolist())) == [
        ("t1", "d1", "copied image"),
        ("t2", "d4", "same image"),
    ]
