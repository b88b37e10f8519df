"""Image files: validated on load, cached within a byte budget, scanned; the demo's photographs.

Images are validated on load: an empty, truncated, corrupt, non-image or decompression-bomb file
raises :class:`ImageError` naming the file; collection-level loaders skip such files and report
them in a :class:`LoadReport`.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

MAX_IMAGE_PIXELS = 89_478_485  # Pillow's own bomb threshold; raised as an error here


class ImageError(ValueError):
    """An image file that cannot be used; the message names the file and the reason."""


def load_image(path: str | Path, mode: str | None = "RGB") -> Image.Image:
    """Open and fully decode an image, raising :class:`ImageError` (naming the file) when it is
    missing, empty, not an image, truncated, corrupt or larger than ``MAX_IMAGE_PIXELS``."""
    path = Path(path)
    if not path.is_file():
        raise ImageError(f"{path}: no such image file")
    if path.stat().st_size == 0:
        raise ImageError(f"{path}: empty file (0 bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                w, h = im.size
                if w * h > MAX_IMAGE_PIXELS:
                    raise ImageError(
                        f"{path}: {w}x{h} pixels exceeds the {MAX_IMAGE_PIXELS:,}-pixel limit "
                        f"(possible decompression bomb)"
                    )
                im.load()  # decode now: truncation and corruption surface here, not later
                return im.convert(mode) if mode else im.copy()
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ImageError(f"{path}: decompression bomb refused ({e})") from None
    except Image.UnidentifiedImageError:
        raise ImageError(f"{path}: not an image file (Pillow cannot identify it)") from None
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageError(f"{path}: truncated or corrupt image ({e})") from None


class ByteLRU:
    """Values kept least recently used out past ``max_mb`` bytes (each value's size given by the
    caller), with hit and miss counts. Hand-written: functools.lru_cache bounds entries, not
    bytes, and images and their tensors differ in size."""

    def __init__(self, max_mb: float):
        self.max_bytes, self.bytes, self.hits, self.misses = int(max_mb * 2**20), 0, 0, 0
        self._values: OrderedDict = OrderedDict()

    def get(self, key):
        """The value kept under ``key`` (now the most recent), or None (counted as a miss)."""
        value = self._values.get(key)
        if value is None:
            self.misses += 1
            return None
        self._values.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key, value, size: int) -> None:
        """Keep ``value`` unless it alone exceeds the budget; older values go to make room."""
        if size > self.max_bytes:
            return
        self._values[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, old) = self._values.popitem(last=False)
            self.bytes -= old

    def stats(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "mb": round(self.bytes / 2**20, 1)}


class ImageCache(ByteLRU):
    """Decoded images within a byte budget (:class:`ByteLRU`), so a loop that meets an image many
    times decodes its file once: a training budget of steps draws each image many times, and an
    evaluation asks many questions about one image (Scrapbook) and every model and style the same
    images. Called like :func:`load_image` (a path, RGB); errors are :func:`load_image`'s."""

    def __call__(self, path: str | Path) -> Image.Image:
        found = self.get(str(path))
        if found is not None:
            return found[0]
        image = load_image(path)
        self.put(str(path), image, image.width * image.height * len(image.getbands()))
        return image


@dataclass
class LoadReport:
    """What a collection-level loader read and what it skipped (with the reason per file)."""

    loaded: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(
        default_factory=list
    )  # kept, but worth a look (named, with why)

    def add_skip(self, path, error: Exception) -> None:
        self.skipped.append((str(path), str(error)))

    def __str__(self) -> str:
        lines = [f"loaded {self.loaded}, skipped {len(self.skipped)}"]
        lines += [f"  skipped {p}: {why}" for p, why in self.skipped]
        lines += [f"  note {p}: {why}" for p, why in self.notes]
        return "\n".join(lines)


IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff"}


def load_images(
    paths: Iterable[str | Path], mode: str | None = "RGB"
) -> tuple[dict[str, Image.Image], LoadReport]:
    """Load many images; bad files are skipped, counted and listed in the report, never fatal."""
    images, report = {}, LoadReport()
    for p in paths:
        try:
            images[str(p)] = load_image(p, mode)
            report.loaded += 1
        except ImageError as e:
            report.add_skip(p, e)
    return images, report


def scan_images(folder: str | Path) -> tuple[list[Path], LoadReport]:
    """The readable images under ``folder`` (recursively, sorted), validating each one; unreadable
    files and files without an image suffix are reported, not returned."""
    good, report = [], LoadReport()
    for p in sorted(Path(folder).rglob("*")):
        if not p.is_file() or p.name.startswith("."):
            continue
        if p.suffix.lower() not in IMAGE_SUFFIXES:
            report.add_skip(p, "no image file extension")
            continue
        try:
            load_image(p, mode=None)
            good.append(p)
            report.loaded += 1
        except ImageError as e:
            report.add_skip(p, e)
    return good, report


# Real photographs that install offline with scikit-image (loaders that need the network are left out).
SAMPLE_IMAGES = (
    "astronaut",
    "coffee",
    "chelsea",
    "rocket",
    "hubble_deep_field",
    "immunohistochemistry",
)


def write_sample_images(folder: str | Path, names: tuple[str, ...] = SAMPLE_IMAGES) -> list[Path]:
    """Save scikit-image's sample photographs as PNGs under ``folder``; returns their paths."""
    import skimage.data  # deferred: scikit-image is heavy and only the demo needs it

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = folder / f"{name}.png"
        if not path.exists():
            array = getattr(skimage.data, name)()
            Image.fromarray(np.asarray(array, dtype=np.uint8)).convert("RGB").save(path)
        paths.append(path)
    return paths
