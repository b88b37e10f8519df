"""YesBut's stages 3 and 4: each satirical two-panel image redrawn with its halves as stick
figures (``STICK``, stage 3) or 3D silhouettes (``3D``, stage 4), in every left/right combination of
:data:`STAGE3` / :data:`STAGE4`. The halves are drawn by an images model with the paper's prompts
(:data:`PROMPTS`) or, offline, by :func:`stylize_local`; :func:`apply_labels` attaches the satirical
labels people give the results. Stage 02 makes them (:func:`lib.stages.annotate.variants`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter
from tqdm.auto import tqdm

from lib.families.yesbut.panels import compose, split
from lib.io import load_image
from lib.models import Request, generate
from lib.models.api import response_image

PROMPTS = {
    "STICK": "Draw using stick figures (black silhouette against a white background) - {description}",
    "3D": "Draw using 3D black silhouettes against a white background - {description}",
}
STAGE3 = [("ORIG", "STICK"), ("STICK", "ORIG"), ("STICK", "STICK")]
STAGE4 = [("ORIG", "3D"), ("3D", "ORIG"), ("STICK", "3D"), ("3D", "STICK"), ("3D", "3D")]


def stylize_local(image: Image.Image, style: str, size: int = 512) -> Image.Image:
    """The offline stand-in for the image API: ``STICK`` = a black silhouette of the scene's
    foreground (Otsu threshold on the grey image, scikit-image) with its edges, on white; ``3D`` = the
    same silhouette shaded by the image's own luminance and a drop shadow. It keeps the layout of the
    original half, not its content's meaning - good enough for the demo's pipeline, not for a dataset."""
    from skimage.filters import threshold_otsu

    img = image.convert("RGB")
    img.thumbnail((size, size))  # shrink large halves, never enlarge
    gray = np.asarray(img.convert("L"), dtype=float)
    mask = gray < threshold_otsu(gray) if gray.std() > 0 else np.zeros_like(gray, bool)
    if mask.mean() > 0.5:
        mask = ~mask
    edges = np.asarray(img.convert("L").filter(ImageFilter.FIND_EDGES)) > 60
    edges[[0, -1], :] = edges[:, [0, -1]] = False  # the filter's frame is not an edge of the scene
    if style == "STICK":
        out = np.where(mask | edges, 0, 255).astype(np.uint8)
        return Image.fromarray(out).convert("RGB")
    if style == "3D":
        shade = np.clip(gray * 0.35, 0, 90)
        shadow = np.roll(np.roll(mask, 6, axis=0), 6, axis=1) & ~mask
        out = np.full(gray.shape, 255.0)
        out[shadow] = 190
        out[mask] = shade[mask]
        return Image.fromarray(out.astype(np.uint8)).convert("RGB")
    raise ValueError(f"unknown style {style!r}; styles: STICK, 3D")


def style_variants(
    records: list[dict],
    descriptions: dict[str, dict],
    out: str | Path,
    model=None,
    store=None,
    stages=(3, 4),
    progress: bool = True,
) -> list[dict]:
    """For each two-panel image with left/right descriptions, generate STICK (stage 3) and 3D (stage 4)
    halves - through an images ``model`` (an ``openai`` spec with ``endpoint: images``) with the
    paper's prompts, all in one cached, costed batch, or by :func:`stylize_local` offline - and
    compose every left/right style combination of those stages. Returns one record per image."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    combos = (STAGE3 if 3 in stages else []) + (STAGE4 if 4 in stages else [])
    styles = sorted({s for pair in combos for s in pair} - {"ORIG"})
    halves = {r["id"]: dict(zip(("left", "right"), split(load_image(r["path"])))) for r in records}
    asks = style_prompts(records, descriptions, styles) if model is not None else []
    drawn = _draw(model, asks, store, progress)
    generator = model.name if model is not None and asks else "local-stylizer"
    made = []
    for r in tqdm(records, desc="style variants", unit="image", disable=not progress):
        versions = _versions(r["id"], halves[r["id"]], styles, drawn)
        made += [_compose(r, versions, left, right, out, generator) for left, right in combos]
    return made


def style_prompts(
    records: list[dict], descriptions: dict[str, dict], styles: list[str]
) -> list[tuple[tuple, str]]:
    """What an images model is asked to draw: ``((id, side, style), the paper's prompt)`` for every
    half with a description, in every style of ``styles``."""
    asks = []
    for r in records:
        for side in ("left", "right"):
            text = descriptions.get(r["id"], {}).get(f"{side}_description")
            for style in styles:
                if text:
                    asks.append(((r["id"], side, style), PROMPTS[style].format(description=text)))
    return asks


def _draw(model, asks: list[tuple[tuple, str]], store, progress: bool) -> dict:
    """The images ``model`` draws for ``asks`` (:func:`style_prompts`), in one cached batch: key ->
    image (None where none came back)."""
    if not asks:
        return {}
    responses = generate(
        model,
        [Request.simple(prompt) for _, prompt in asks],
        store=store,
        progress=progress,
        desc=f"style variants ({model.name})",
    )
    return {key: response_image(resp) for (key, _), resp in zip(asks, responses)}


def _versions(item: str, halves: dict, styles: list[str], drawn: dict) -> dict:
    """(side, style) -> that half in that style: the original, the drawn one, or else the local
    stylizer's."""
    versions = {("left", "ORIG"): halves["left"], ("right", "ORIG"): halves["right"]}
    for side in ("left", "right"):
        for style in styles:
            versions[(side, style)] = drawn.get((item, side, style)) or stylize_local(
                halves[side], style
            )
    return versions


def _compose(
    record: dict, versions: dict, left: str, right: str, out: Path, generator: str
) -> dict:
    """The ``left`` / ``right`` style combination of one image, written under ``out``; its record."""
    stem = record.get("name") or record["id"]
    name = f"{stem}_{left}_YES_{right}_BUT.png"
    compose(versions[("left", left)], versions[("right", right)], height=384).save(out / name)
    return {
        "id": f"{stem}-{left}-{right}",
        "path": str(out / name),
        "original": record["id"],
        "left_style": left,
        "right_style": right,
        "stage": 3 if (left, right) in STAGE3 else 4,
        "generator": generator,
    }


def apply_labels(variants: list[dict], labels: dict[str, bool]) -> tuple[list[dict], list[str]]:
    """Attach satirical / non-satirical labels (from the widget or a labels file) to the variants;
    returns (labelled variants, ids still unlabelled)."""
    out, missing = [], []
    for v in variants:
        if v["id"] in labels:
            out.append({**v, "label": "satirical" if labels[v["id"]] else "non_satirical"})
        else:
            missing.append(v["id"])
    return out, missing
