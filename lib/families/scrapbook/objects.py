"""Scrapbook objects: Pillow-drawn shapes with masks, and real-object cut-outs (COCO or RGBA files)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from PIL import Image, ImageDraw

from lib.io import ImageError, load_image, scan_images

DATA = Path(__file__).with_name("data")  # the family's templates, vocabulary and expressions

SIDES = {"triangle": 3, "square": 4, "pentagon": 5, "hexagon": 6, "heptagon": 7}


@lru_cache(maxsize=1)
def vocabulary() -> dict:
    """The shapes, colours, sizes, regions, relations and COCO classes of ``vocabulary.yaml``."""
    return yaml.safe_load((DATA / "vocabulary.yaml").read_text())


def coco_classes() -> list[str]:
    return [c for group in vocabulary()["coco_classes"].values() for c in group]


@dataclass(frozen=True)
class ObjectSpec:
    """What to draw: a shape with colour and size, or a real-object cut-out (class only)."""

    kind: str  # shape name or object class
    color: str | None = None  # shapes only
    size: int | None = None  # shapes only: bounding-box side in pixels
    source: str | None = None  # cut-outs: file (and annotation id) it came from

    @property
    def is_shape(self) -> bool:
        return self.color is not None

    def attributes(self) -> dict:
        return {"shape": self.kind, "color": self.color} if self.is_shape else {"shape": self.kind}


def draw_shape(shape: str, color: str, size: int) -> tuple[Image.Image, Image.Image]:
    """An RGBA sprite and its mask (L, 255 inside) of ``shape`` filling a ``size`` x ``size`` box.

    Regular polygons are inscribed in the box with a flat bottom edge; a thin dark outline keeps
    white shapes visible on light backgrounds without changing their colour name.
    """
    if shape not in vocabulary()["shapes"]:
        raise ValueError(f"unknown shape {shape!r}; known: {vocabulary()['shapes']}")
    rgb = tuple(vocabulary()["colors"][color])
    mask = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(mask)
    box = (0, 0, size - 1, size - 1)
    if shape == "circle":
        draw.ellipse(box, fill=255)
    elif shape == "square":
        draw.rectangle(box, fill=255)
    else:
        n = SIDES[shape]
        r = (size - 1) / 2
        start = math.pi / 2 + math.pi / n  # a vertex at the top for odd n, a flat bottom for all
        pts = [
            (
                r + r * math.cos(start + 2 * math.pi * k / n),
                r + r * math.sin(start + 2 * math.pi * k / n),
            )
            for k in range(n)
        ]
        ys = [p[1] for p in pts]  # stretch vertically so the polygon fills its box
        lo, hi = min(ys), max(ys)
        pts = [(x, (y - lo) / (hi - lo) * (size - 1)) for x, y in pts]
        draw.polygon(pts, fill=255)
    sprite = Image.new("RGBA", (size, size), rgb + (0,))
    sprite.putalpha(mask)
    tight = mask.getbbox()  # boxes are the drawn extent, so positions agree with the pixels
    return sprite.crop(tight), mask.crop(tight)


def load_cutout(path: str | Path) -> tuple[Image.Image, Image.Image]:
    """An RGBA cut-out file and its mask (alpha > 0); the class is the file's folder name."""
    sprite = load_image(path, mode="RGBA")
    mask = sprite.getchannel("A").point(lambda a: 255 if a > 0 else 0)
    tight = mask.getbbox()
    if tight is None:
        raise ValueError(f"{path}: cut-out is fully transparent")
    return sprite.crop(tight), mask.crop(tight)


def cutouts_from_folder(folder: str | Path) -> dict[str, list[Path]]:
    """``{class: [files]}`` from a folder of RGBA cut-outs laid out as ``<class>/<file>.png``;
    unreadable files are reported (by name) in the returned report, not used."""
    paths, report = scan_images(folder)
    by_class: dict[str, list[Path]] = {}
    for p in paths:
        by_class.setdefault(p.parent.name.replace("_", " "), []).append(p)
    if report.skipped:
        print(f"cut-outs: {report}")
    return by_class


def extract_coco_cutouts(
    images_dir: str | Path,
    annotations: str | Path,
    out_dir: str | Path,
    classes: list[str] | None = None,
    min_side: int | None = None,
    max_per_class: int | None = None,
) -> dict[str, list[Path]]:
    """Cut objects out of COCO-format images with pycocotools and save them as RGBA PNGs under
    ``out_dir/<class>/``. Applies the paper's filters: drop crowd annotations, objects smaller than
    ``min_side`` (48 px) in either dimension, and objects touching the image border."""
    from pycocotools.coco import COCO

    min_side = min_side or vocabulary()["coco_min_object_side"]
    classes = classes or coco_classes()
    coco = COCO(str(annotations))
    out_dir = Path(out_dir)
    result: dict[str, list[Path]] = {}
    name_of = {c["id"]: c["name"] for c in coco.loadCats(coco.getCatIds())}
    wanted = [cid for cid, name in name_of.items() if name in classes]
    for ann in coco.loadAnns(coco.getAnnIds(catIds=wanted, iscrowd=False)):
        name = name_of[ann["category_id"]]
        if max_per_class and len(result.get(name, [])) >= max_per_class:
            continue
        info = coco.loadImgs(ann["image_id"])[0]
        x, y, w, h = ann["bbox"]
        if w < min_side or h < min_side:
            continue
        if x <= 0 or y <= 0 or x + w >= info["width"] - 1 or y + h >= info["height"] - 1:
            continue  # touches the border: possibly incomplete
        try:
            image = load_image(Path(images_dir) / info["file_name"], mode="RGB")
        except ImageError as e:
            print(f"skipped annotation {ann['id']}: {e}")
            continue
        mask = Image.fromarray(coco.annToMask(ann) * 255)
        box = tuple(int(round(v)) for v in (x, y, x + w, y + h))
        sprite = image.convert("RGBA")
        sprite.putalpha(mask)
        path = out_dir / name.replace(" ", "_") / f"{ann['id']}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        sprite.crop(box).save(path)
        result.setdefault(name, []).append(path)
    (out_dir / "cutouts.json").write_text(
        json.dumps({k: [str(p) for p in v] for k, v in sorted(result.items())}, indent=1)
    )
    return result
