"""Stage 01's manifest rows: one :class:`Record` per collected image (hashes, size, where it came
from, what its source knows of it), made by :func:`record_for` / :func:`records_of`. Every source
of images - the stage's own kinds and those a family brings (``SOURCES``,
:class:`lib.tasks.collection.Source`) - makes its records here, so a row means the same whatever
collected it."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from lib.io.images import ImageError, LoadReport, load_image


@dataclass
class Record:
    id: str
    path: str
    name: str  # the file stem: how hand-written files (annotations, labels) refer to an image
    sha256: str
    phash: str
    width: int
    height: int
    source: str
    licence: str = "unknown"
    url: str = ""
    label: str | None = None
    left_style: str | None = None
    right_style: str | None = None
    stage: int | None = None
    timestamp: str | None = None
    original: str | None = None
    annotation: dict = field(default_factory=dict)
    # two-panel images (those with styles per half): what their source's layout check found:
    # {"panels": 2 | 3 | None, "cut": x, "evidence": "..."}
    layout: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def record_for(path: str | Path, source: str, check=None, **extra) -> Record:
    """Hash, perceptual-hash and measure one image (raises :class:`lib.io.ImageError` if it is bad);
    ``check(image)`` adds fields from the loaded image (a two-panel image's ``layout``). The path
    is stored absolute: the one rule for image paths, so a manifest row and every dataset built from
    it resolve the same file from every stage and working directory."""
    # deferred on purpose: only collecting hashes images, and every family's import reaches this
    # module (the registry imports them all, in lmms-eval's venv too, which has no imagehash)
    import imagehash

    path = Path(path).resolve()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    image = load_image(path)
    if check is not None:
        extra = {**check(image), **extra}
    return Record(
        id=f"img-{digest[:16]}",
        path=str(path),
        name=path.stem,
        sha256=digest,
        phash=str(imagehash.phash(image)),
        width=image.width,
        height=image.height,
        source=source,
        **extra,
    )


def records_of(
    paths,
    source: str,
    report: LoadReport,
    progress: bool,
    extra=lambda p: {},
    desc: str | None = None,
    check=None,
) -> list[Record]:
    """A record per readable image (``extra(path)``: its fields from the source, ``check``: as
    :func:`record_for`); a bad one is added to ``report`` with the reason, never ingested."""
    out = []
    for p in tqdm(paths, desc=desc or f"collect {source}", unit="image", disable=not progress):
        try:
            out.append(record_for(p, source, check, **extra(Path(p))))
        except (ImageError, OSError) as e:
            report.add_skip(str(p), str(e))
    report.loaded = len(out)
    return out
