"""Scrapbook dataset generation: sets, backgrounds, arrangements, images, questions, streamed out.

Units of work are ``(set s, background b, arrangement a, region pair p)``. For each unit the main
object goes in the pair's first region and the reference object in the second so that the main
object stands at one relative position to it; the relative positions are tried in a seeded order
and the first that can be placed is used (so each unit yields one scene of up to ``x`` images,
which gives the paper's 162 images for Table 2's parameters). Then the remaining arrangement
objects are added one at a time, none overlapping and none standing in that relative position to
the reference. Every step is an image whose scene records its parent (one object fewer).

Each unit has its own RNG seeded from ``(seed, s, b, a, p)``, so shards produce exactly the units
the unsharded run would, and :func:`merge` restores the unsharded files byte for byte.
Choices where the paper is silent are in :mod:`lib.families.scrapbook.layout`,
:mod:`lib.families.scrapbook.questions` and :mod:`lib.families.scrapbook.programs`, and here:
- deterministic selection slides a window one position per set over the vocabulary lists
  (classes, colours) and over the sizes ``70 + 40k`` for ``k < N``, wrapping around;
- the colour list is alphabetical with brown and gray (``vocabulary.yaml`` says why: Figure 9 and
  Tables 5-6 use them; with it the window reproduces Table 5's present counts);
- plain backgrounds are the vocabulary colours unused by the set's objects, in vocabulary order;
  photographs are resized and centre-cropped to the canvas size (the paper's 1280x768 by default);
- question sets per image: the programs of ``templates.yaml`` (:func:`queries`); the wrong
  absolute positions are where the unit's other objects are or will be added, completed to
  ``n_wrong_positions`` (3, as Table 6 counts) by seeded draws; wrong colours and shapes are drawn
  with the seed from the dataset's own values; a question never needs more than the paper's four
  concepts (a relative question with a two-attribute subject describes its reference by one attribute);
- ``n_questions_per_type`` paraphrases are drawn per query (4.4's "five questions about the
  presence of an object given a specific position"); every absent arrangement object is asked
  about (the paper's absent counts are subsampled in a way it does not describe:
  :mod:`lib.families.scrapbook.paper`).
"""

from __future__ import annotations

import csv
import heapq
import json
import multiprocessing
import random
import shutil
import traceback
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageOps

from lib.config import ParamsError
from lib.io import (HashingWriter, IncompleteDataset, aside_folder, check_complete, dataset_info, load_image,
                    manifest_fields, scan_images, swap_in, write_json, write_sample_images)
from lib.paths import cache_dir
from lib.families.scrapbook import programs as P
from lib.families.scrapbook import questions as Q
from lib.families.scrapbook.layout import OTHER_REGION_SHARE, Placer, region_of, region_shares, regions, relation
from lib.families.scrapbook.objects import (ObjectSpec, cutouts_from_folder, draw_shape, extract_coco_cutouts, load_cutout,
                                   vocabulary)
from lib.families.scrapbook.task import ScrapbookQA

SELECTIONS = ("same", "unique", "random")


class ScrapbookParamError(ParamsError):
    """An invalid generator parameter, named, raised before anything is generated."""


@dataclass
class ScrapbookParams:
    """The generator's parameters (paper Table 2 names in comments)."""

    objects: str = "shapes"  # shapes | cutouts (a folder of RGBA files per class) | coco
    object_selection: str = "deterministic"  # deterministic (sliding window) | random
    class_selection: str = "unique"  # same | unique | random
    color_selection: str = "unique"
    size_selection: str = "unique"
    n_sets: int = 3  # S
    objects_per_set: int = 5  # N
    n_backgrounds: int = 3  # B
    n_arrangements: int = 2  # A
    objects_per_image: int = 3  # x
    n_region_pairs: int = 3  # P
    n_questions_per_type: int = 3
    n_wrong_positions: int = 3  # wrong absolute positions asked per present object (paper Table 6: 3)
    backgrounds: str = "plain"  # plain | samples (scikit-image photographs) | a folder of images
    cutouts_dir: str = ""  # objects=cutouts: <dir>/<class>/*.png (RGBA)
    coco_images: str = ""  # objects=coco: the images folder (e.g. val2017/)
    coco_annotations: str = ""  # objects=coco: instances_val2017.json
    shapes: list[str] = field(default_factory=lambda: list(vocabulary()["shapes"]))
    colors: list[str] = field(default_factory=lambda: list(vocabulary()["colors"]))
    canvas: list[int] = field(default_factory=lambda: list(vocabulary()["canvas"]))  # [width, height] (paper: 1280x768)
    size_start: int = field(default_factory=lambda: vocabulary()["size_start"])  # first object's box side (paper: 70)
    size_step: int = field(default_factory=lambda: vocabulary()["size_step"])  # growth per object (paper: 40)
    types: list[str] = field(default_factory=lambda: list(Q.TYPES))  # question types to generate
    groups: list[str] = field(default_factory=lambda: ["np", "abs", "rel"])  # position groups to generate
    forms: list[str] = field(default_factory=lambda: list(Q.FORMS))  # forms to generate
    seed: int = 0
    max_tries: int = 400  # placement draws per object before giving up (counted, reported)

    @classmethod
    def from_dict(cls, d: dict, source: str = "params") -> "ScrapbookParams":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ScrapbookParamError(f"{source}: unknown Scrapbook parameter(s) {unknown}; known: {sorted(known)}")
        return cls(**d)

    def validate(self, check_files: bool = True) -> None:
        """Fail before generating, naming the parameter at fault. ``check_files=False`` checks the
        values only (a params check on a machine without the data: the folders are not looked at)."""
        v = vocabulary()
        def bad(name, why):
            raise ScrapbookParamError(f"Scrapbook parameter {name}={getattr(self, name)!r}: {why}")

        for name in ("n_sets", "objects_per_set", "n_backgrounds", "n_arrangements", "objects_per_image",
                     "n_region_pairs", "n_questions_per_type", "max_tries"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                bad(name, "must be a positive integer")
        if self.objects not in ("shapes", "cutouts", "coco"):
            bad("objects", "must be shapes, cutouts or coco")
        if not isinstance(self.n_wrong_positions, int) or not 0 <= self.n_wrong_positions <= 8:
            bad("n_wrong_positions", "must be an integer from 0 to 8 (the other regions)")
        if self.object_selection not in ("deterministic", "random"):
            bad("object_selection", "must be deterministic or random")
        for name in ("class_selection", "color_selection", "size_selection"):
            if getattr(self, name) not in SELECTIONS:
                bad(name, f"must be one of {SELECTIONS}")
        if self.objects_per_image > self.objects_per_set:
            bad("objects_per_image", f"x cannot exceed objects_per_set (N={self.objects_per_set})")
        if self.objects_per_image < 2:
            bad("objects_per_image", "x must be at least 2 (a main and a reference object)")
        if self.n_region_pairs > 81:
            bad("n_region_pairs", "P cannot exceed the 81 ordered pairs of the 9 regions")
        n = self.objects_per_set
        if self.n_arrangements > n * (n - 1):
            bad("n_arrangements", f"A cannot exceed the N*(N-1)={n * (n - 1)} ordered (main, reference) pairs")
        unknown_shapes = [s for s in self.shapes if s not in v["shapes"]]
        if unknown_shapes:
            bad("shapes", f"unknown shape(s) {unknown_shapes}; known: {v['shapes']}")
        unknown_colors = [c for c in self.colors if c not in v["colors"]]
        if unknown_colors:
            bad("colors", f"unknown colour(s) {unknown_colors}; known: {list(v['colors'])}")
        if self.objects == "shapes":
            for name, pool in (("class_selection", self.shapes), ("color_selection", self.colors)):
                if getattr(self, name) == "unique" and len(pool) < n:
                    bad(name, f"unique selection needs at least N={n} values, the list has {len(pool)}")
        if self.objects == "cutouts" and check_files and not Path(self.cutouts_dir).is_dir():
            bad("cutouts_dir", "objects=cutouts needs a folder of <class>/<file>.png cut-outs")
        if self.objects == "coco" and check_files:
            if not Path(self.coco_images).is_dir():
                bad("coco_images", "objects=coco needs the COCO images folder (e.g. val2017/)")
            if not Path(self.coco_annotations).is_file():
                bad("coco_annotations", "objects=coco needs the instances JSON (e.g. instances_val2017.json)")
        if self.backgrounds not in ("plain", "samples") and check_files and not Path(self.backgrounds).is_dir():
            bad("backgrounds", "must be plain, samples, or an existing folder of images")
        for name, allowed in (("types", Q.TYPES), ("groups", ("np", "abs", "rel")), ("forms", Q.FORMS)):
            chosen = getattr(self, name)
            if not chosen or any(c not in allowed for c in chosen):
                bad(name, f"must be a non-empty list drawn from {list(allowed)}")
        if len(self.canvas) != 2 or min(self.canvas) < 48:
            bad("canvas", "must be [width, height], each at least 48 pixels")
        if self.size_start < 8 or self.size_step < 0:
            bad("size_start", "objects need a box side of at least 8 pixels and a non-negative size_step")
        width, height = self.canvas
        side = self.size_start + self.size_step * (n - 1)  # the largest object
        if self.objects == "shapes" and min(side, width // 3) * min(side, height // 3) < 0.75 * side * side:
            bad("objects_per_set", f"its largest object ({side}px) cannot sit 3/4 inside a "
                                   f"{width // 3}x{height // 3} region")


def _select(pool: list, n: int, how: str, window: int, deterministic: bool, rng: random.Random) -> list:
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
        res.cutouts = extract_coco_cutouts(params.coco_images, params.coco_annotations, cache / "coco_cutouts")
    if params.objects != "shapes":
        res.cutouts = {c: f for c, f in sorted(res.cutouts.items()) if f}
        if params.class_selection == "unique" and len(res.cutouts) < params.objects_per_set:
            raise ScrapbookParamError(
                f"Scrapbook parameter objects={params.objects!r}: {len(res.cutouts)} classes with usable cut-outs, "
                f"unique selection needs objects_per_set={params.objects_per_set}")
    if params.backgrounds != "plain":
        folder = Path(params.backgrounds)
        if params.backgrounds == "samples":
            folder = cache / "backgrounds"
            write_sample_images(folder, ("astronaut", "hubble_deep_field", "immunohistochemistry", "camera"))
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
                f"background images in {folder} ({len(res.skipped)} skipped: {res.skipped[:3]})")
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
            sets.append([ObjectSpec(k, source=str(random.Random(f"{params.seed}:{s}:{j}").choice(res.cutouts[k])))
                         for j, k in enumerate(kinds)])
    return sets


def set_backgrounds(params: ScrapbookParams, res: Resources, objs: list[ObjectSpec], s: int) -> list[str]:
    """The B backgrounds of set ``s``: colour names (plain) or image paths."""
    if params.backgrounds == "plain":
        used = {o.color for o in objs}
        free = [c for c in vocabulary()["colors"] if c not in used]
        if len(free) < params.n_backgrounds:
            raise ScrapbookParamError(
                f"Scrapbook parameter n_backgrounds={params.n_backgrounds}: set {s} leaves only {len(free)} plain "
                f"colours unused by its objects ({free})")
        return free[:params.n_backgrounds]
    files = [str(f) for f in res.background_files]
    if params.object_selection == "deterministic":
        return [files[(s + j) % len(files)] for j in range(params.n_backgrounds)]
    return random.Random(f"{params.seed}:bg:{s}").sample(files, params.n_backgrounds)


def units(params: ScrapbookParams) -> list[tuple[int, int, int, int]]:
    return [(s, b, a, p) for s in range(params.n_sets) for b in range(params.n_backgrounds)
            for a in range(params.n_arrangements) for p in range(params.n_region_pairs)]


def arrangement(objs: list[ObjectSpec], a: int) -> list[ObjectSpec]:
    """Arrangement ``a``: main = object a, reference = the next one, then the rest in set order;
    (main, reference) pairs differ between arrangements for a < N*(N-1)."""
    n = len(objs)
    main, ref = a % n, (a % n + 1 + a // n) % n
    return [objs[main], objs[ref]] + [o for i, o in enumerate(objs) if i not in (main, ref)]



@lru_cache(maxsize=512)
def sprite(spec: ObjectSpec) -> tuple[Image.Image, Image.Image]:
    """The RGBA sprite and mask of an object (drawn once per process)."""
    return draw_shape(spec.kind, spec.color, spec.size) if spec.is_shape else load_cutout(spec.source)


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
    rec = {"index": i, "role": role, "shape": spec.kind, "box": list(box), "region": region_of(box, width, height)}
    if spec.is_shape:
        rec.update(color=spec.color, size=spec.size)
    else:
        rec["source"] = spec.source
    return rec


def build_unit(params: ScrapbookParams, unit: tuple, objs: list[ObjectSpec], bg: str, failures: Counter) -> list[Step]:
    """The images of one unit (main, + reference, + each further object), or [] when the pair of
    regions admits no placement (counted in ``failures``)."""
    s, b, a, p = unit
    width, height = params.canvas
    rng = random.Random(f"{params.seed}:{s}:{b}:{a}:{p}")
    order = arrangement(objs, a)
    grid = regions(width, height)
    names = list(grid)
    pairs = random.Random(f"{params.seed}:pairs:{s}:{b}:{a}").sample(
        [(r1, r2) for r1 in names for r2 in names], params.n_region_pairs)
    r_main, r_ref = pairs[p]
    placer = Placer(width, height, rng, max_tries=params.max_tries)
    main_spec, ref_spec = order[0], order[1]
    mw, mh = sprite(main_spec)[0].size
    rw, rh = sprite(ref_spec)[0].size
    relations = list(vocabulary()["relations"])
    rng.shuffle(relations)
    placed = None
    for rel in relations:
        for _ in range(10):  # a few main positions per relation before trying the next relation
            main_box = placer.place(mw, mh, [], grid[r_main])
            if main_box is None:
                break
            ref_box = placer.place(rw, rh, [main_box], grid[r_ref], check=lambda box: relation(main_box, box) == rel)
            if ref_box is not None:
                placed = (rel, main_box, ref_box)
                break
        if placed:
            break
    if placed is None:
        failures["unit: no placement for the region pair"] += 1
        return []
    rel, main_box, ref_box = placed
    boxes, specs, roles = [main_box, ref_box], [main_spec, ref_spec], ["main", "reference"]
    for spec in order[2:params.objects_per_image]:
        w, h = sprite(spec)[0].size
        box = placer.place(w, h, boxes, check=lambda bx: relation(bx, ref_box) not in (None, rel)
                           and max(region_shares(bx, width, height).values()) >= OTHER_REGION_SHARE)
        if box is None:
            failures["object: no free position"] += 1
            break
        boxes.append(box)
        specs.append(spec)
        roles.append("other")

    canvas = background(bg, (width, height))
    mask = Image.new("L", (width, height), 0)
    steps, parent = [], None
    base = f"s{s}_b{b}_a{a}_p{p}"
    unit_regions = [region_of(bx, width, height) for bx in boxes]  # where this unit's objects are (or will be)
    for k, (spec, box, role) in enumerate(zip(specs, boxes, roles)):
        spr, m = sprite(spec)
        canvas = canvas.copy()
        canvas.paste(spr, box[:2], m)
        mask = mask.copy()
        mask.paste(k + 1, box[:2], m)
        image_id = f"{base}_x{k + 1}"
        present = [_object_record(i, sp, bx, rl, width, height)
                   for i, (sp, bx, rl) in enumerate(zip(specs[:k + 1], boxes[:k + 1], roles[:k + 1]))]
        absent = [dict(sp.attributes(), role=("reference" if j == 1 else "other")) for j, sp in enumerate(order)
                  if j > k or j >= len(specs)]
        scene = {"id": image_id, "image": f"images/{image_id}.png", "mask": f"masks/{image_id}.png",
                 "parent": parent, "unit": list(unit), "set": s, "background": bg, "width": width, "height": height,
                 "relation": rel, "region_pair": [r_main, r_ref], "unit_regions": unit_regions,
                 "objects": present, "absent": absent}
        steps.append(Step(canvas, mask, scene))
        parent = image_id
    return steps


def queries(scene: dict, colors: list[str] | None = None, shapes: list[str] | None = None, seed: int = 0,
            n_wrong_positions: int = ScrapbookParams.n_wrong_positions) -> list[dict]:
    """The structured queries asked about one image (paper 4.4 and 5.1): what the programs of
    ``lib/families/scrapbook/data/templates.yaml`` ask (each program's comment there says what it asks and
    why; :mod:`lib.families.scrapbook.programs` runs them), each query once, in order. Wrong values are
    drawn with the dataset's seed from the dataset's colours and shapes (by default the vocabulary's)."""
    return [q for _, q in P.keyed_queries(scene, colors, shapes, seed, n_wrong_positions=n_wrong_positions)]


def item_jsonl(scene: dict, params: ScrapbookParams, shapes: list[str], colors: list[str],
               summary: "Summary | None" = None) -> str:
    """The dataset rows of one image as JSONL text (one line per row): n paraphrases per query, in
    the four forms.

    Each line is one :class:`lib.schema.Item` (task :attr:`ScrapbookQA.name`), written by hand
    rather than with ``json.dumps(Item(...).to_dict())``: a Scrapbook set has hundreds of thousands
    of rows that share most of their JSON, so the pieces are encoded once per query and form, each
    row only escapes its paraphrase, and the rows' pieces are joined once per image rather than
    formatted into a string per row first (``json.dumps`` per row cost twice the PNG encoding of the
    whole dataset when profiled). The price is that the schema is spelt here a second time; a test
    checks that a line reads back into an Item and is written again byte for byte.
    """
    rng = random.Random(f"{params.seed}:q:{scene['id']}")
    image = _dumps([scene["image"]])
    head, mid = f'{{"id":"{scene["id"]}-', f'","task":{_dumps(ScrapbookQA.name)},"question":'
    parts: list[str] = []
    n = 0  # rows so far: the row's number in its id
    scene_json = (f',"image":"{scene["id"]}","parent":{_dumps(scene["parent"])},"unit":{_dumps(scene["unit"])},'
                  '"form":"')
    types, groups = set(params.types), set(params.groups)
    forms = tuple(f for f in Q.FORMS if f in params.forms)
    # what a kind of question (its type, or what it asks) shares on this image: its alternatives and,
    # per form, the question's JSON-escaped affixes and the row's end (scene, form, alternatives)
    per_kind: dict[str, tuple[list[str], list[tuple[str, str, str, str]]]] = {}
    for key, query in P.keyed_queries(scene, colors, shapes, params.seed, n_wrong_positions=params.n_wrong_positions):
        if query["type"] not in types or query["group"] not in groups:
            continue
        texts = Q.paraphrases(query, key)
        chosen = rng.sample(texts, min(params.n_questions_per_type, len(texts)))
        answer = Q.answer(query, scene)
        level, query_json = _query_json(key)
        subgroup = Q.subgroup(query, scene)
        kind = query["ask"] if query["type"] == "recognition" else query["type"]
        if kind not in per_kind:
            alts = _alternatives(kind, params.objects_per_set, tuple(colors), tuple(shapes))
            per_kind[kind] = alts, [
                (form, _encode_str(pre)[1:-1], _encode_str(suf)[1:-1] + '"',
                 f'{scene_json}{form}"' + (f',"alternatives":{_alts_json(tuple(alts))}' if form == "enumerated" else "")
                 + "}}\n")
                for form, (pre, suf) in _affixes(kind, tuple(alts)).items() if form in forms]
        alts, affixes = per_kind[kind]
        absurd = answer == Q.UNK
        if summary is not None:
            summary.add({"type": query["type"], "group": query["group"], "subgroup": subgroup, "level": level,
                         "query": query}, answer, len(chosen), forms)
        # meta: type, group, subgroup, level, concepts, query, absurd, image, parent, unit, form[, alternatives]
        meta_json = (f'{{"type":"{query["type"]}","group":"{query["group"]}","subgroup":{subgroup},'
                     f'{query_json},"absurd":{"true" if absurd else "false"},"paraphrase":')
        body = f',"images":{image},"options":null,"answer":[{_encode_str(answer)}],"meta":{meta_json}'
        # an absurd question's enumerated form answers with the last alternative ("not applicable")
        enumerated = f',"images":{image},"options":null,"answer":[{_encode_str(alts[-1])}],"meta":{meta_json}' \
            if absurd else body
        pieces = [(pre, suf + (enumerated if form == "enumerated" else body), end) for form, pre, suf, end in affixes]
        for j, text in enumerate(chosen):
            escaped, paraphrase = _encode_str(text)[1:-1], str(j)
            for pre, rest, end in pieces:
                parts += (head, f"{n:05d}", mid, '"', pre, escaped, rest, paraphrase, end)
                n += 1
    return "".join(parts)


class Summary:
    """Counts by type / group / subgroup / form / level, and the concept tables (paper 5.1-5.2)."""

    def __init__(self):
        # (type, group, subgroup, level, absurd, forms) -> questions in each of the forms: a query is
        # counted once, whatever its forms (``counts`` spells them out)
        self._queries: Counter = Counter()
        self.concepts: Counter = Counter()  # (level, kind, value, subgroup, type)
        self.answers: dict = {}  # (level, kind, value) -> set of answer classes seen
        self.images = 0

    def add(self, meta: dict, answer: str, paraphrases: int = 1, forms: tuple = Q.FORMS) -> None:
        """Count ``paraphrases`` questions of one query in each of ``forms``."""
        m = meta
        absurd = answer == Q.UNK
        self._queries[(m["type"], m["group"], m["subgroup"], m["level"], absurd, tuple(forms))] += paraphrases
        if m["type"] in ("presence", "counting") and "original" in forms and m["level"] <= 2:
            t = m["query"]["target"]
            if m["level"] == 1 or m["group"] == "np" or (m["group"] == "abs" and len(t) == 1):
                kind = "color + object" if len(t) == 2 else ("color" if "color" in t else "object")
                value = " ".join(v for v in (t.get("color"), t.get("shape")) if v)
                self.concepts[(m["level"], kind, value, m["subgroup"], m["type"])] += paraphrases
                cls = ("yes" if answer == "yes" else "no" if answer == "no" else
                       "zero" if answer == "0" else "unk" if answer == Q.UNK else "positive")
                self.answers.setdefault((m["level"], kind, value), set()).add(cls)

    def add_row(self, row: dict) -> None:
        """Count one stored row (used when merging shards)."""
        answer = row["answer"][0]
        if row["meta"]["form"] == "enumerated" and answer == Q.templates()["not_applicable"]:
            answer = Q.UNK
        self.add(row["meta"], answer, 1, (row["meta"]["form"],))

    @property
    def counts(self) -> Counter:
        """Questions by (type, group, subgroup, form, level, absurd)."""
        out: Counter = Counter()
        for (typ, group, sub, level, absurd, forms), n in self._queries.items():
            for form in forms:
                out[(typ, group, sub, form, level, absurd)] += n
        return out

    def rows(self) -> tuple[list[dict], list[dict]]:
        """The counts table and the concept table as lists of dicts (CSV-ready)."""
        counts = [dict(zip(("type", "group", "subgroup", "form", "level", "absurd"), k), questions=v)
                  for k, v in sorted(self.counts.items())]
        concepts = []
        for (lvl, kind, value, sub, typ), v in sorted(self.concepts.items()):
            seen = self.answers[(lvl, kind, value)]
            concepts.append({"level": lvl, "concept": kind, "value": value, "subgroup": sub, "type": typ,
                             "questions": v, "enabled": {"yes", "no"} <= seen and {"zero", "positive"} <= seen})
        return counts, concepts

    def to_dict(self) -> dict:
        counts = self.counts

        def by(i: int) -> dict:
            return {str(k): v for k, v in sorted(_sum_by(counts, i).items(), key=lambda kv: str(kv[0]))}

        return {"images": self.images, "questions": sum(counts.values()), "by_type": by(0), "by_group": by(1),
                "by_subgroup": by(2), "by_form": by(3), "by_level": by(4), "absurd": by(5).get("True", 0)}


def _sum_by(counter: Counter, i: int) -> Counter:
    out: Counter = Counter()
    for k, v in counter.items():
        out[k[i]] += v
    return out


class BackgroundIO:
    """PNG encoding and file writes on worker threads, so question generation overlaps them (zlib
    and file writes release the GIL). Text writes keep their order (one writer thread); at most
    ``max_pending`` jobs wait, so memory stays flat however large the dataset."""

    def __init__(self, image_workers: int = 2, max_pending: int = 16):
        self._images = ThreadPoolExecutor(image_workers, thread_name_prefix="scrapbook-png")
        self._text = ThreadPoolExecutor(1, thread_name_prefix="scrapbook-jsonl")
        self._pending: deque = deque()
        self._max = max_pending

    def save(self, image: Image.Image, path: Path, **options) -> None:
        self._track(self._images.submit(image.save, path, **options))

    def write(self, f, text: str) -> None:
        self._track(self._text.submit(f.write, text))

    def _track(self, future) -> None:
        self._pending.append(future)
        while len(self._pending) > self._max:
            self._pending.popleft().result()  # re-raises a worker's error here

    def __enter__(self) -> "BackgroundIO":
        return self

    def __exit__(self, *exc) -> None:
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            self._images.shutdown()
            self._text.shutdown()


def _dumps(row) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


_encode_str = json.encoder.encode_basestring  # the C string escaper json.dumps itself uses


@lru_cache(maxsize=65536)
def _query_json(key: str) -> tuple[int, str]:
    """A query's level and its ``"level":..,"concepts":..,"query":..`` JSON (keys sorted), once per
    distinct query (``key``: its :func:`lib.families.scrapbook.consistency.query_id`)."""
    query = json.loads(key)
    concepts = Q.concepts(query)
    level = min(4, len(concepts))
    return level, f'"level":{level},"concepts":{_dumps(concepts)},"query":{_dumps(query)}'


@lru_cache(maxsize=256)
def _alts_json(alts: tuple) -> str:
    return _dumps(list(alts))


def _kind_query(kind: str) -> dict:
    """The part of a query that forms and alternatives depend on: its type, or what it asks."""
    return {"type": "recognition", "ask": kind} if kind in ("color", "shape", "region") else {"type": kind}


@lru_cache(maxsize=256)
def _affixes(kind: str, alts: tuple) -> dict:
    return Q.affixes(_kind_query(kind), list(alts))


@lru_cache(maxsize=256)
def _alternatives(kind: str, max_count: int, colors: tuple, shapes: tuple) -> list[str]:
    return Q.alternatives(_kind_query(kind), max_count, list(colors), list(shapes), list(vocabulary()["regions"]))


def _finish(out: Path, summary: Summary, info: dict, items_bytes: int, items_sha256: str) -> dict:
    """The tables, ``summary.json`` and, last, ``dataset.json`` with the manifest of the items
    file (its size and SHA-256, as the :class:`lib.io.HashingWriter` that wrote it counted them)."""
    for name, rows in zip(("counts.csv", "concepts.csv"), summary.rows()):
        with open(out / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["questions"])
            writer.writeheader()
            writer.writerows(rows)
    stats = {**summary.to_dict(), **info}
    write_json(out / "summary.json", stats)
    write_json(out / "dataset.json", {**dataset_info("scrapbook", license="CC-BY-4.0 (generated)"),
                                      **manifest_fields(stats["questions"], summary.images, items_bytes, items_sha256),
                                      **info})
    return stats


def generate(params: ScrapbookParams, out_dir: str | Path, shard: int = 0, num_shards: int = 1,
             progress: bool = True) -> dict:
    """Generate (this shard of) the dataset into ``out_dir`` as a stream; returns the summary.

    Writes ``images/`` and ``masks/`` (PNG; mask pixel k = object k, 0 = background),
    ``scenes.jsonl``, ``items.jsonl`` (one :class:`lib.schema.Item` per line), ``counts.csv``,
    ``concepts.csv``, ``summary.json`` and ``dataset.json`` (last, with the manifest readers check:
    :mod:`lib.io`). Memory stays flat: rows go to disk as they are made. The folder is built beside
    ``out_dir`` under a name no other run uses and swapped in when complete (:func:`_built_aside`),
    so a killed run leaves the old dataset or the new one, never a mix, and two runs building the
    same dataset at once each swap in a whole one.
    """
    if not 0 <= shard < num_shards:
        raise ScrapbookParamError(f"--shard {shard} must be in [0, --num-shards={num_shards})")
    return _built_aside(Path(out_dir), lambda tmp: _generate(params, tmp, shard, num_shards, progress))


def _built_aside(out: Path, build) -> dict:
    """Run ``build(folder)`` on a new folder beside ``out`` that is this run's alone
    (:func:`lib.io.aside_folder`), then put it in ``out``'s place (:func:`lib.io.swap_in`, which
    deletes only the version it replaces); a build that fails or is interrupted removes its folder."""
    tmp = aside_folder(out)
    try:
        stats = build(tmp)
        swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return stats


def _generate(params: ScrapbookParams, out: Path, shard: int, num_shards: int, progress: bool) -> dict:
    from tqdm.auto import tqdm

    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "masks").mkdir(parents=True, exist_ok=True)
    res = prepare(params, cache_dir("scrapbook"))
    sets = object_sets(params, res)
    shapes = list(params.shapes) if params.objects == "shapes" else sorted(res.cutouts)
    colors = list(params.colors)
    backgrounds = [set_backgrounds(params, res, objs, s) for s, objs in enumerate(sets)]
    mine = [u for i, u in enumerate(units(params)) if i % num_shards == shard]
    failures: Counter = Counter()
    images = 0
    with open(out / ".scenes.jsonl.part", "wb") as scenes_f, \
            QuestionLines(out / ".items.jsonl.part", params, shapes, colors) as questions:
        with BackgroundIO() as io:
            for unit in tqdm(mine, desc="scrapbook units", disable=not progress):
                s, b = unit[0], unit[1]
                for step in build_unit(params, unit, sets[s], backgrounds[s][b], failures):
                    io.save(step.image, out / step.scene["image"])
                    io.save(step.mask, out / step.scene["mask"], compress_level=1)  # label maps: fast zlib suffices
                    io.write(scenes_f, (_dumps(step.scene) + "\n").encode())
                    questions.add(step.scene)
                    images += 1
    (out / ".items.jsonl.part").replace(out / "items.jsonl")
    (out / ".scenes.jsonl.part").replace(out / "scenes.jsonl")
    questions.summary.images = images
    info = {"params": asdict(params), "shard": shard, "num_shards": num_shards, "units": len(mine),
            "placement_failures": dict(failures), "skipped_files": res.skipped,
            "sets": [[o.attributes() for o in objs] for objs in sets]}
    return _finish(out, questions.summary, info, questions.bytes, questions.sha256)


class QuestionLines:
    """The question lines of each image (:func:`item_jsonl`), written to ``path`` with their manifest
    (``bytes`` and ``sha256``) and counted in ``summary``, by a worker process while this one renders
    scenes and encodes PNGs (:func:`_generate`): both are Python that holds the GIL, so on one
    process the question lines, the largest share of a large set's time, waited for the rendering
    and the other way round. Scenes go to the worker through a pipe, in order (a full pipe makes the
    sender wait: memory stays flat); the worker's error is raised here with its traceback. Where
    processes cannot be forked the lines are made on this thread, the same bytes. Hand-written: a
    pool would not keep one ordered file and its running digest."""

    def __init__(self, path: Path, params: ScrapbookParams, shapes: list[str], colors: list[str]):
        self.path, self._args = Path(path), (params, shapes, colors)
        self.summary, self.bytes, self.sha256 = Summary(), 0, ""  # set when the context exits
        self._conn = self._proc = self._here = None

    def __enter__(self) -> "QuestionLines":
        if "fork" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("fork")
            self._conn, child = ctx.Pipe()
            self._proc = ctx.Process(target=_question_worker, args=(child, self._conn, self.path, *self._args),
                                     daemon=True, name="scrapbook-questions")
            self._proc.start()
            child.close()
        else:
            self._here = _ItemsFile(self.path, *self._args)
        return self

    def add(self, scene: dict) -> None:
        if self._here is not None:
            self._here.add(scene)
            return
        try:
            self._conn.send(scene)
        except OSError:  # the worker has stopped: its error, or its exit code
            self._result()

    def __exit__(self, exc_type, *exc) -> None:
        if self._here is not None:
            self.summary, self.bytes, self.sha256 = self._here.close()
            return
        try:
            if exc_type is not None:
                self._proc.terminate()
                return
            self._conn.send(None)
            self.summary, self.bytes, self.sha256 = self._result()
        finally:
            self._proc.join()
            self._conn.close()

    def _result(self) -> tuple[Summary, int, str]:
        """What the worker sends back when it is done; its error (or its death) raised here."""
        try:
            status, payload = self._conn.recv()
        except EOFError:
            self._proc.join()
            raise RuntimeError(f"{self.path}: the question-lines worker died (exit code {self._proc.exitcode})") from None
        if status == "error":
            raise RuntimeError(f"{self.path}: making the question lines failed in the worker:\n{payload}")
        return payload


class _ItemsFile:
    """An items file being written, image by image (:func:`item_jsonl`), with its size and SHA-256
    and the :class:`Summary` of its questions: what :class:`QuestionLines` runs in its worker, or
    here."""

    def __init__(self, path: Path, params: ScrapbookParams, shapes: list[str], colors: list[str]):
        self._f = open(path, "wb")
        self._items, self._args, self.summary = HashingWriter(self._f), (params, shapes, colors), Summary()

    def add(self, scene: dict) -> None:
        self._items.write(item_jsonl(scene, *self._args, self.summary).encode())

    def close(self) -> tuple[Summary, int, str]:
        self._f.close()
        return self.summary, self._items.bytes, self._items.hexdigest()


def _question_worker(conn, parent_end, path: Path, params: ScrapbookParams, shapes: list[str],
                     colors: list[str]) -> None:
    """:class:`QuestionLines`' worker: each scene received, its lines written, until ``None``; then
    ``("ok", (summary, bytes, sha256))`` or ``("error", traceback)`` sent back. The parent's end of
    the pipe, inherited by the fork, is closed first: a parent that dies (killed) then ends this
    worker's ``recv`` instead of leaving it waiting for ever."""
    parent_end.close()
    try:
        items = _ItemsFile(path, params, shapes, colors)
        while (scene := conn.recv()) is not None:
            items.add(scene)
        conn.send(("ok", items.close()))
    except EOFError:
        return  # the parent is gone: nobody to answer (the folder it was building is cleared by the next build)
    except BaseException:
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass  # the parent is gone
    finally:
        conn.close()


def _unit_key(line: str) -> tuple:
    row = json.loads(line)
    return tuple(row["unit"] if "unit" in row else row["meta"]["unit"])


def merge(shard_dirs: list[str | Path], out_dir: str | Path) -> dict:
    """Union of shard outputs in unit order: the same files an unsharded run writes. Refuses an
    unfinished shard, a shard given twice, shards made with different parameters or seeds (their
    union is no dataset) and a set with gaps: shards ``0..k-1`` of one ``num_shards=k`` must all be
    there, each once (the error names the missing indexes)."""
    out = Path(out_dir)
    shards = [Path(d) for d in shard_dirs]
    for d in shards:
        if not (d / "items.jsonl").exists() or not (d / "summary.json").exists() or not (d / "dataset.json").exists():
            raise FileNotFoundError(f"{d}: not a finished Scrapbook shard (no items.jsonl, summary.json or "
                                    f"dataset.json); generate that shard again")
        try:
            check_complete(d)
        except IncompleteDataset as e:
            raise ScrapbookParamError(f"merge: {e}") from None
    infos = [json.loads((d / "summary.json").read_text()) for d in shards]
    seen: dict = {}
    for d, i in zip(shards, infos):
        key = (d.resolve(), None) if i.get("shard") is None else (None, i["shard"])
        if d.resolve() in {k[0] for k in seen} or key in seen:
            raise ScrapbookParamError(f"merge: {d} is shard {i.get('shard')} of {i.get('num_shards')}, given twice "
                                      f"(also as {seen.get(key, d)})")
        seen[key] = d
        seen[(d.resolve(), None)] = d
        if i["params"] != infos[0]["params"] or i.get("num_shards") != infos[0].get("num_shards"):
            diff = sorted(k for k in i["params"] if i["params"][k] != infos[0]["params"].get(k))
            raise ScrapbookParamError(f"merge: {d} was made with other parameters than {shards[0]} "
                                      f"({', '.join(diff) or 'num_shards'} differ); shards of one dataset share them")
    _check_complete_set(shards, infos)
    return _built_aside(out, lambda tmp: _merge(shards, infos, tmp))


def _check_complete_set(shards: list[Path], infos: list[dict]) -> None:
    """Every shard of ``0..num_shards-1`` once: a merge of some of them would look like the whole
    dataset (its summary says ``num_shards: 1``) with questions missing."""
    for d, i in zip(shards, infos):
        if not isinstance(i.get("shard"), int) or not isinstance(i.get("num_shards"), int):
            raise ScrapbookParamError(f"merge: {d} is not a shard (its summary.json has shard={i.get('shard')!r}, "
                                      f"num_shards={i.get('num_shards')!r}; a merged folder is merged already)")
    k = infos[0]["num_shards"]
    have = sorted(i["shard"] for i in infos)
    outside = [s for s in have if not 0 <= s < k]
    missing = sorted(set(range(k)) - set(have))
    if outside or missing:
        raise ScrapbookParamError(
            f"merge: the shards given ({', '.join(map(str, have))}) are not all of the {k} shards of one dataset: "
            + (f"shard(s) {', '.join(map(str, missing))} missing" if missing else "")
            + ("; " if missing and outside else "") + (f"shard(s) {outside} out of range" if outside else "")
            + "; generate the missing shard(s) (--shard i --num-shards k) and pass every shard folder")


def _merge(shards: list[Path], infos: list[dict], out: Path) -> dict:
    for sub in ("images", "masks"):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for d in shards:
            for f in sorted((d / sub).iterdir()):
                shutil.copy2(f, out / sub / f.name)
    summary, written = Summary(), {}
    for name in ("scenes.jsonl", "items.jsonl"):
        files = [open(d / name, encoding="utf-8") for d in shards]
        try:
            with open(out / f".{name}.part", "wb") as f:
                written[name] = HashingWriter(f)
                for line in heapq.merge(*files, key=_unit_key):
                    written[name].write(line.encode("utf-8"))
                    if name == "items.jsonl":
                        summary.add_row(json.loads(line))
                    else:
                        summary.images += 1
        finally:
            for fh in files:
                fh.close()
        (out / f".{name}.part").replace(out / name)
    failures: Counter = Counter()
    for i in infos:
        failures.update(i.get("placement_failures", {}))
    info = {"params": infos[0]["params"], "shard": None, "num_shards": 1, "merged_from": [str(d) for d in shards],
            "units": sum(i["units"] for i in infos), "placement_failures": dict(failures),
            "skipped_files": [s for i in infos for s in i.get("skipped_files", [])], "sets": infos[0]["sets"]}
    return _finish(out, summary, info, written["items.jsonl"].bytes, written["items.jsonl"].hexdigest())
