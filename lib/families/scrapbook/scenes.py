"""Scrapbook's scenes: the object sets, backgrounds and units of work, and the images of one unit
(:func:`build_unit`) with their object masks and scene records.

Units of work are ``(set s, background b, arrangement a, region pair p)``. For each unit the main
object goes in the pair's first region and the reference object in the second so that the main
object stands at one relative position to it; the relative positions are tried in a seeded order
and the first that can be placed is used (so each unit yields one scene of up to ``x`` images,
which gives the paper's 162 images for Table 2's parameters).
Then the remaining arrangement objects are added one at a time, none overlapping and none standing
in that relative position to the reference. Every step is an image whose scene records its parent
(one object fewer). Each unit has its own RNG seeded from ``(seed, s, b, a, p)``, so shards
produce exactly the units the unsharded run would.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageOps

from lib.families.scrapbook.layout import (
    OTHER_REGION_SHARE,
    Placer,
    region_of,
    region_shares,
    regions,
    relation,
)
from lib.families.scrapbook.objects import (
    ObjectSpec,
    cutouts_from_folder,
    draw_shape,
    extract_coco_cutouts,
    load_cutout,
    vocabulary,
)
from lib.families.scrapbook.params import ScrapbookParamError, ScrapbookParams
from lib.io import load_image, scan_images, write_sample_images


def _select(
    pool: list, n: int, how: str, window: int, deterministic: bool, rng: random.Random
) -> list:
    if how == "same":
        return [pool[window % len(pool)] if deterministic else rng.choice(pool)] * n
    if how == "random":
        return [rng.choice(pool) for _ in range(n)]
    if deterministic:
        return [pool[(window + j) % len(pool)] for j in range(n)]
    return rng.sample(pool, n)


@dataclass
class Resources:
    """What the units draw from: cut-out files per class and background images, validated once."""

    cutouts: dict[str, list[Path]] = field(default_factory=dict)
    background_files: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def prepare(params: ScrapbookParams, cache: Path) -> Resources:
    """Validate parameters and load the object and background sources (before any generation)."""
    params.validate()
    res = Resources()
    if params.objects == "cutouts":
        res.cutouts = cutouts_from_folder(params.cutouts_dir)
    elif params.objects == "coco":
        res.cutouts = extract_coco_cutouts(
            params.coco_images, params.coco_annotations, cache / "coco_cutouts"
        )
    if params.objects != "shapes":
        res.cutouts = {c: f for c, f in sorted(res.cutouts.items()) if f}
        if params.class_selection == "unique" and len(res.cutouts) < params.objects_per_set:
            raise ScrapbookParamError(
                f"Scrapbook parameter objects={params.objects!r}: {len(res.cutouts)} classes with usable cut-outs, "
                f"unique selection needs objects_per_set={params.objects_per_set}"
            )
    if params.backgrounds != "plain":
        folder = Path(params.backgrounds)
        if params.backgrounds == "samples":
            folder = cache / "backgrounds"
            write_sample_images(
                folder, ("astronaut", "hubble_deep_field", "immunohistochemistry", "camera")
            )
        files, report = scan_images(folder)
        min_side = vocabulary()["min_background_side"]
        for f in files:
            with Image.open(f) as im:
                if min(im.size) >= min_side:
                    res.background_files.append(f)
                else:
                    report.skipped.append((str(f), f"smaller than {min_side}x{min_side}"))
        res.skipped = report.skipped
        if len(res.background_files) < params.n_backgrounds:
            raise ScrapbookParamError(
                f"Scrapbook parameter n_backgrounds={params.n_backgrounds}: only {len(res.background_files)} usable "
                f"background images in {folder} ({len(res.skipped)} skipped: {res.skipped[:3]})"
            )
    return res


def object_sets(params: ScrapbookParams, res: Resources) -> list[list[ObjectSpec]]:
    """The S sets of N objects (deterministic sliding window or seeded random)."""
    rng = random.Random(f"{params.seed}:sets")
    det = params.object_selection == "deterministic"
    n = params.objects_per_set
    sizes = [params.size_start + params.size_step * k for k in range(n)]
    sets = []
    for s in range(params.n_sets):
        if params.objects == "shapes":
            kinds = _select(params.shapes, n, params.class_selection, s, det, rng)
            colors = _select(params.colors, n, params.color_selection, s, det, rng)
            sz = _select(sizes, n, params.size_selection, s, det, rng)
            sets.append([ObjectSpec(k, c, z) for k, c, z in zip(kinds, colors, sz)])
        else:
            kinds = _select(sorted(res.cutouts), n, params.class_selection, s, det, rng)
            sets.append(
                [
                    ObjectSpec(
                        k,
                        source=str(random.Random(f"{params.seed}:{s}:{j}").choice(res.cutouts[k])),
                    )
                    for j, k in enumerate(kinds)
                ]
            )
    return sets


def set_backgrounds(
    params: ScrapbookParams, res: Resources, objs: list[ObjectSpec], s: int
) -> list[str]:
    """The B backgrounds of set ``s``: colour names (plain) or image paths."""
    if params.backgrounds == "plain":
        used = {o.color for o in objs}
        free = [c for c in vocabulary()["colors"] if c not in used]
        if len(free) < params.n_backgrounds:
            raise ScrapbookParamError(
                f"Scrapbook parameter n_backgrounds={params.n_backgrounds}: set {s} leaves only {len(free)} plain "
                f"colours unused by its objects ({free})"
            )
        return free[: params.n_backgrounds]
    files = [str(f) for f in res.background_files]
    if params.object_selection == "deterministic":
        return [files[(s + j) % len(files)] for j in range(params.n_backgrounds)]
    return random.Random(f"{params.seed}:bg:{s}").sample(files, params.n_backgrounds)


# a unit is (set, background, arrangement, region pair): the parameters that count each
UNIT_SIZES = ("n_sets", "n_backgrounds", "n_arrangements", "n_region_pairs")


def units(params: ScrapbookParams) -> list[tuple[int, int, int, int]]:
    return [
        (s, b, a, p)
        for s in range(params.n_sets)
        for b in range(params.n_backgrounds)
        for a in range(params.n_arrangements)
        for p in range(params.n_region_pairs)
    ]


def unit_index(params: dict, unit) -> int | None:
    """``unit``'s place in :func:`units` under ``params`` (as ``summary.json`` records them), or None
    when it is no unit of theirs; shard ``i`` of ``k`` makes the units whose place is ``i`` modulo ``k``."""
    sizes = [params[name] for name in UNIT_SIZES]
    if (
        not isinstance(unit, (list, tuple))
        or len(unit) != len(sizes)
        or not all(type(u) is int and 0 <= u < n for u, n in zip(unit, sizes))
    ):
        return None
    index = 0
    for u, n in zip(unit, sizes):
        index = index * n + u
    return index


def arrangement(objs: list[ObjectSpec], a: int) -> list[ObjectSpec]:
    """Arrangement ``a``: main = object a, reference = the next one, then the rest in set order;
    (main, reference) pairs differ between arrangements for a < N*(N-1)."""
    n = len(objs)
    main, ref = a % n, (a % n + 1 + a // n) % n
    return [objs[main], objs[ref]] + [o for i, o in enumerate(objs) if i not in (main, ref)]


@lru_cache(maxsize=512)
def sprite(spec: ObjectSpec) -> tuple[Image.Image, Image.Image]:
    """The RGBA sprite and mask of an object (drawn once per process)."""
    return (
        draw_shape(spec.kind, spec.color, spec.size) if spec.is_shape else load_cutout(spec.source)
    )


def background(name: str, size: tuple[int, int]) -> Image.Image:
    if name in vocabulary()["colors"]:
        return Image.new("RGB", size, tuple(vocabulary()["colors"][name]))
    return ImageOps.fit(load_image(name), size)


@dataclass
class Step:
    """One generated image: its pixels, its object-index mask and its scene record."""

    image: Image.Image
    mask: Image.Image
    scene: dict


def _object_record(i: int, spec: ObjectSpec, box, role: str, width: int, height: int) -> dict:
    rec = {
        "index": i,
        "role": role,
        "shape": spec.kind,
        "box": list(box),
        "region": region_of(box, width, height),
    }
    if spec.is_shape:
        rec.update(color=spec.color, size=spec.size)
    else:
        rec["source"] = spec.source
    return rec


def build_unit(
    params: ScrapbookParams, unit: tuple, objs: list[ObjectSpec], bg: str, failures: Counter
) -> list[Step]:
    """The images of one unit (main, + reference, + each further object), or [] when the pair of
    regions admits no placement (counted in ``failures``)."""
    s, b, a, p = unit
    width, height = params.canvas
    rng = random.Random(f"{params.seed}:{s}:{b}:{a}:{p}")
    order = arrangement(objs, a)
    grid = regions(width, height)
    names = list(grid)
    pairs = random.Random(f"{params.seed}:pairs:{s}:{b}:{a}").sample(
        [(r1, r2) for r1 in names for r2 in names], params.n_region_pairs
    )
    r_main, r_ref = pairs[p]
    placer = Placer(width, height, rng, max_tries=params.max_tries)
    placed = _place_pair(placer, rng, order[0], order[1], grid[r_main], grid[r_ref])
    if placed is None:
        failures["unit: no placement for the region pair"] += 1
        return []
    rel, main_box, ref_box = placed
    boxes, specs, roles = [main_box, ref_box], [order[0], order[1]], ["main", "reference"]
    _place_others(params, placer, order, rel, boxes, specs, roles, failures)
    return _steps(unit, bg, (width, height), order, specs, boxes, roles, rel, [r_main, r_ref])


def _place_pair(
    placer: Placer,
    rng: random.Random,
    main_spec: ObjectSpec,
    ref_spec: ObjectSpec,
    main_area,
    ref_area,
) -> tuple | None:
    """``(relation, main box, reference box)``: the main object in its region and the reference in
    its own, in the first relation of a seeded order that can be placed; None when none can."""
    mw, mh = sprite(main_spec)[0].size
    rw, rh = sprite(ref_spec)[0].size
    relations = list(vocabulary()["relations"])
    rng.shuffle(relations)
    for rel in relations:
        for _ in range(10):  # a few main positions per relation before trying the next relation
            main_box = placer.place(mw, mh, [], main_area)
            if main_box is None:
                break
            ref_box = placer.place(
                rw,
                rh,
                [main_box],
                ref_area,
                check=lambda box: relation(main_box, box) == rel,  # noqa: B023 - called within this iteration
            )
            if ref_box is not None:
                return rel, main_box, ref_box
    return None


def _place_others(
    params: ScrapbookParams,
    placer: Placer,
    order: list[ObjectSpec],
    rel: str,
    boxes: list,
    specs: list[ObjectSpec],
    roles: list[str],
    failures: Counter,
) -> None:
    """Add the arrangement's further objects to ``boxes``/``specs``/``roles`` one at a time, none
    overlapping and none standing in ``rel`` to the reference, until one finds no free position."""
    width, height = params.canvas
    ref_box = boxes[1]
    for spec in order[2 : params.objects_per_image]:
        w, h = sprite(spec)[0].size
        box = placer.place(
            w,
            h,
            boxes,
            check=lambda bx: (
                relation(bx, ref_box) not in (None, rel)
                and max(region_shares(bx, width, height).values()) >= OTHER_REGION_SHARE
            ),
        )
        if box is None:
            failures["object: no free position"] += 1
            break
        boxes.append(box)
        specs.append(spec)
        roles.append("other")


def _steps(
    unit: tuple,
    bg: str,
    size: tuple[int, int],
    order: list[ObjectSpec],
    specs: list[ObjectSpec],
    boxes: list,
    roles: list[str],
    rel: str,
    region_pair: list[str],
) -> list[Step]:
    """One image per object added, in order, each scene naming its parent (one object fewer)."""
    s, b, a, p = unit
    width, height = size
    canvas = background(bg, (width, height))
    mask = Image.new("L", (width, height), 0)
    steps, parent = [], None
    base = f"s{s}_b{b}_a{a}_p{p}"
    unit_regions = [
        region_of(bx, width, height) for bx in boxes
    ]  # where this unit's objects are (or will be)
    for k, (spec, box, _role) in enumerate(zip(specs, boxes, roles)):
        spr, m = sprite(spec)
        canvas = canvas.copy()
        canvas.paste(spr, box[:2], m)
        mask = mask.copy()
        mask.paste(k + 1, box[:2], m)
        image_id = f"{base}_x{k + 1}"
        present = [
            _object_record(i, sp, bx, rl, width, height)
            for i, (sp, bx, rl) in enumerate(zip(specs[: k + 1], boxes[: k + 1], roles[: k + 1]))
        ]
        absent = [
            dict(sp.attributes(), role=("reference" if j == 1 else "other"))
            for j, sp in enumerate(order)
            if j > k or j >= len(specs)
        ]
        scene = {
            "id": image_id,
            "image": f"images/{image_id}.png",
            "mask": f"masks/{image_id}.png",
            "parent": parent,
            "unit": list(unit),
            "set": s,
            "background": bg,
            "width": width,
            "height": height,
            "relation": rel,
            "region_pair": region_pair,
            "unit_regions": unit_regions,
            "objects": present,
            "absent": absent,
        }
        steps.append(Step(canvas, mask, scene))
        parent = image_id
    return steps
