"""The Scrapbook generator's parameters (paper Table 2's S, N, B, A, x, P and the rest) and their
checks: every parameter is validated, and named when at fault, before anything is generated."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lib.config import ParamsError
from lib.families.scrapbook import questions
from lib.families.scrapbook.objects import vocabulary

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
    n_wrong_positions: int = (
        3  # wrong absolute positions asked per present object (paper Table 6: 3)
    )
    backgrounds: str = "plain"  # plain | samples (scikit-image photographs) | a folder of images
    cutouts_dir: str = ""  # objects=cutouts: <dir>/<class>/*.png (RGBA)
    coco_images: str = ""  # objects=coco: the images folder (e.g. val2017/)
    coco_annotations: str = ""  # objects=coco: instances_val2017.json
    shapes: list[str] = field(default_factory=lambda: list(vocabulary()["shapes"]))
    colors: list[str] = field(default_factory=lambda: list(vocabulary()["colors"]))
    canvas: list[int] = field(
        default_factory=lambda: list(vocabulary()["canvas"])
    )  # [width, height] (paper: 1280x768)
    size_start: int = field(
        default_factory=lambda: vocabulary()["size_start"]
    )  # first object's box side (paper: 70)
    size_step: int = field(
        default_factory=lambda: vocabulary()["size_step"]
    )  # growth per object (paper: 40)
    types: list[str] = field(
        default_factory=lambda: list(questions.TYPES)
    )  # question types to generate
    groups: list[str] = field(
        default_factory=lambda: ["np", "abs", "rel"]
    )  # position groups to generate
    forms: list[str] = field(default_factory=lambda: list(questions.FORMS))  # forms to generate
    seed: int = 0
    max_tries: int = 400  # placement draws per object before giving up (counted, reported)

    @classmethod
    def from_dict(cls, d: dict, source: str = "params") -> ScrapbookParams:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ScrapbookParamError(
                f"{source}: unknown Scrapbook parameter(s) {unknown}; known: {sorted(known)}"
            )
        return cls(**d)

    def validate(self, check_files: bool = True) -> None:
        """Fail before generating, naming the parameter at fault. ``check_files=False`` checks the
        values only (a params check on a machine without the data: the folders are not looked at)."""
        self._check_counts()
        self._check_vocabulary()
        if check_files:
            self._check_files()
        self._check_lists_and_sizes()

    def _bad(self, name: str, why: str) -> None:
        raise ScrapbookParamError(f"Scrapbook parameter {name}={getattr(self, name)!r}: {why}")

    def _check_counts(self) -> None:
        """S, N, B, A, x, P and the other counts, alone and against each other."""
        bad = self._bad
        for name in (
            "n_sets",
            "objects_per_set",
            "n_backgrounds",
            "n_arrangements",
            "objects_per_image",
            "n_region_pairs",
            "n_questions_per_type",
            "max_tries",
        ):
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
            bad(
                "n_arrangements",
                f"A cannot exceed the N*(N-1)={n * (n - 1)} ordered (main, reference) pairs",
            )

    def _check_vocabulary(self) -> None:
        """Shapes and colours the vocabulary knows, enough of them for a unique selection."""
        v, n, bad = vocabulary(), self.objects_per_set, self._bad
        unknown_shapes = [s for s in self.shapes if s not in v["shapes"]]
        if unknown_shapes:
            bad("shapes", f"unknown shape(s) {unknown_shapes}; known: {v['shapes']}")
        unknown_colors = [c for c in self.colors if c not in v["colors"]]
        if unknown_colors:
            bad("colors", f"unknown colour(s) {unknown_colors}; known: {list(v['colors'])}")
        if self.objects == "shapes":
            for name, pool in (("class_selection", self.shapes), ("color_selection", self.colors)):
                if getattr(self, name) == "unique" and len(pool) < n:
                    bad(
                        name,
                        f"unique selection needs at least N={n} values, the list has {len(pool)}",
                    )

    def _check_files(self) -> None:
        """The cut-out, COCO and background folders the parameters name exist."""
        bad = self._bad
        if self.objects == "cutouts" and not Path(self.cutouts_dir).is_dir():
            bad("cutouts_dir", "objects=cutouts needs a folder of <class>/<file>.png cut-outs")
        if self.objects == "coco":
            if not Path(self.coco_images).is_dir():
                bad("coco_images", "objects=coco needs the COCO images folder (e.g. val2017/)")
            if not Path(self.coco_annotations).is_file():
                bad(
                    "coco_annotations",
                    "objects=coco needs the instances JSON (e.g. instances_val2017.json)",
                )
        if self.backgrounds not in ("plain", "samples") and not Path(self.backgrounds).is_dir():
            bad("backgrounds", "must be plain, samples, or an existing folder of images")

    def _check_lists_and_sizes(self) -> None:
        """The types, groups and forms asked for, the canvas, and objects that fit its regions."""
        bad, n = self._bad, self.objects_per_set
        for name, allowed in (
            ("types", questions.TYPES),
            ("groups", ("np", "abs", "rel")),
            ("forms", questions.FORMS),
        ):
            chosen = getattr(self, name)
            if not chosen or any(c not in allowed for c in chosen):
                bad(name, f"must be a non-empty list drawn from {list(allowed)}")
        if len(self.canvas) != 2 or min(self.canvas) < 48:
            bad("canvas", "must be [width, height], each at least 48 pixels")
        if self.size_start < 8 or self.size_step < 0:
            bad(
                "size_start",
                "objects need a box side of at least 8 pixels and a non-negative size_step",
            )
        width, height = self.canvas
        side = self.size_start + self.size_step * (n - 1)  # the largest object
        if (
            self.objects == "shapes"
            and min(side, width // 3) * min(side, height // 3) < 0.75 * side * side
        ):
            bad(
                "objects_per_set",
                f"its largest object ({side}px) cannot sit 3/4 inside a "
                f"{width // 3}x{height // 3} region",
            )
