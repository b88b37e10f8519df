"""TSV with base64 images (VLMEvalKit / lmms-eval style): exported from and imported as Items."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import warnings
from collections.abc import Iterable
from pathlib import Path

from PIL import Image

from lib.core.schema import Item
from lib.families.memeqa.task import MultipleChoice
from lib.io import LoadReport, load_image

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


_UNSAFE = re.compile(r"[^\w.-]")


def export_tsv(folder: str | Path, items: Iterable[Item], path: str | Path) -> int:
    """Write items as a VLMEvalKit-style TSV: index, image (base64 of the file bytes), question,
    A.., answer (letter(s) or text), category, id. Images are read (and validated) from ``folder``."""
    folder, path = Path(folder), Path(path)
    items = list(items)
    width = max((len(it.options or []) for it in items), default=0)
    fields = ["index", "id", "image", "question", *_LETTERS[:width], "answer", "category"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, delimiter="\t")
        w.writeheader()
        for n, it in enumerate(items):
            img = folder / it.images[0] if it.images else None
            if img is not None:
                load_image(
                    img, mode=None
                )  # fail on a bad image here, naming it, not in a reader later
            row = {
                "index": n,
                "id": it.id,
                "question": it.question,
                "category": it.meta.get("specific_type", it.task),
                "image": base64.b64encode(img.read_bytes()).decode() if img else "",
            }
            for i, opt in enumerate(it.options or []):
                row[_LETTERS[i]] = opt
            if it.options is not None:
                row["answer"] = "".join(_LETTERS[i] for i in it.answer)
            else:  # one reference as itself, several as a JSON list
                row["answer"] = it.answer[0] if len(it.answer) == 1 else json.dumps(it.answer)
            w.writerow(row)
    return len(items)


def _tsv_answer(answer: str, options: list[str]) -> list:
    """A row's answer: option letters as indices where it has options, else reference texts (one,
    or a JSON list); a ValueError says why it cannot be read."""
    if options:
        if not answer or any(c not in _LETTERS[: len(options)] for c in answer):
            raise ValueError(
                f"answer {answer!r} is not option letters A-{_LETTERS[len(options) - 1]}"
            )
        return [_LETTERS.index(c) for c in answer]
    try:
        ans = json.loads(answer) if answer.startswith("[") else [answer]
    except json.JSONDecodeError as e:
        raise ValueError(f"answer {answer[:80]!r} is not valid JSON ({e})") from None
    if not isinstance(ans, list) or not all(isinstance(a, str) for a in ans):
        raise ValueError(f"answer {answer[:80]!r} is not a list of reference texts")
    return ans


def _tsv_image(image: str, rid: str, folder: Path) -> str:
    """A row's base64 image written under ``folder/images/``; its path in the folder. A
    ValueError says why it does not decode."""
    try:
        data = base64.b64decode(image, validate=True)
        with (
            warnings.catch_warnings()
        ):  # a decompression bomb is refused, not loaded with a warning
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                im.load()
                ext = (im.format or "png").lower().replace("jpeg", "jpg")
    except Exception as e:
        raise ValueError(f"image does not decode: {type(e).__name__}: {e}") from None
    rel = f"images/{_UNSAFE.sub('_', rid)}.{ext}"  # ids may hold '/' (MemeQA's do)
    (folder / rel).write_bytes(data)
    return rel


def import_tsv(
    path: str | Path, folder: str | Path, task: str = MultipleChoice.name
) -> tuple[list[Item], LoadReport]:
    """Read a base64-image TSV into Items, writing images to ``folder/images/``. Rows whose image
    does not decode are skipped and reported (naming the row), not fatal."""
    path, folder = Path(path), Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    csv.field_size_limit(1 << 31)
    items, report = [], LoadReport()
    with path.open(newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f, delimiter="\t"), 2):
            rid = row.get("id") or row.get("index") or str(n)
            where = f"{path}:{n} (id={rid})"
            options = [row[c] for c in _LETTERS if row.get(c)]
            try:
                ans = _tsv_answer(row.get("answer", ""), options)
                images = [_tsv_image(row["image"], rid, folder)] if row.get("image") else []
            except ValueError as e:
                report.add_skip(where, str(e))
                continue
            items.append(
                Item(
                    id=str(rid),
                    task=task,
                    images=images,
                    question=row.get("question", ""),
                    options=options or None,
                    answer=ans,
                    meta={"category": row.get("category"), "source": path.name},
                )
            )
            report.loaded += 1
    return items, report
