"""Embeddings of images and texts for stage 07's maps, and how well groups separate in them.

**Image embeddings**: CLIP image features through transformers (any CLIP hub id or local path).
Where no CLIP weights exist (offline, as on the project's own machines) :func:`descriptor_embeddings`
stands in - a colour histogram (HSV) and a gradient-orientation histogram (HOG, scikit-image) per
image - and every map says which embedding it shows (:data:`DESCRIPTOR`). **Text embeddings**:
all-MiniLM-L6-v2 (sentence-transformers). :func:`separation` scores groups in either space; the 2-D
maps themselves are :mod:`lib.pages.maps`'.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lib.io import load_image
from lib.models.tiny import sentence_encoder

DESCRIPTOR = "colour + HOG descriptor (no CLIP weights)"


# --- images and texts -----------------------------------------------------------------------------


def descriptor_embeddings(paths, size: int = 96) -> np.ndarray:
    """Hand-made image descriptor (L2-normalised): an 8x4x4 HSV colour histogram and a 9-bin HOG
    orientation histogram pooled over the image. It sees colour and texture, not meaning: a stand-in
    so maps can be drawn without CLIP weights."""
    from skimage.feature import hog

    rows = []
    for p in paths:
        image = load_image(p).resize((size, size))
        hsv = np.asarray(image.convert("HSV"), dtype=float) / 256
        colour, _ = np.histogramdd(hsv.reshape(-1, 3), bins=(8, 4, 4), range=((0, 1),) * 3)
        gray = np.asarray(image.convert("L"), dtype=float) / 255
        grad = hog(
            gray,
            orientations=9,
            pixels_per_cell=(16, 16),
            cells_per_block=(1, 1),
            feature_vector=True,
        )
        grad = grad.reshape(-1, 9).mean(axis=0)
        v = np.concatenate([colour.ravel() / colour.sum(), grad / (grad.sum() or 1)])
        rows.append(v / (np.linalg.norm(v) or 1))
    return np.asarray(rows)


def clip_embeddings(paths, model: str, batch_size: int = 32) -> np.ndarray:
    """CLIP image features (L2-normalised) from any CLIP checkpoint (hub id or local folder)."""
    import torch
    from transformers import CLIPModel
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    try:
        clip = CLIPModel.from_pretrained(model).eval()
        processor = CLIPImageProcessorPil.from_pretrained(model)
    except OSError as e:
        raise OSError(
            f"cannot load the CLIP model {model!r}: {e}. A hub id needs the network (or a prior "
            f"download); leave clip_model empty to use the {DESCRIPTOR}."
        ) from e
    out = []
    with torch.no_grad():
        for i in range(0, len(paths), batch_size):
            images = [load_image(p) for p in paths[i : i + batch_size]]
            pixels = processor(images=images, return_tensors="pt")["pixel_values"]
            feats = clip.get_image_features(pixel_values=pixels)
            feats = getattr(feats, "pooler_output", feats)
            out.append(torch.nn.functional.normalize(feats, dim=-1).numpy())
    return np.concatenate(out)


def image_embeddings(paths, clip_model: str = "") -> tuple[np.ndarray, str]:
    """(embeddings, name of the embedding): CLIP when ``clip_model`` is given, else the descriptor."""
    if clip_model:
        return clip_embeddings(list(paths), clip_model), f"CLIP image features ({clip_model})"
    return descriptor_embeddings(list(paths)), DESCRIPTOR


def text_embeddings(texts, model: str | None = None) -> np.ndarray:
    """Sentence embeddings (normalised); default all-MiniLM-L6-v2 from its PyPI package."""
    return sentence_encoder(model).encode(
        list(texts), normalize_embeddings=True, show_progress_bar=False
    )


# --- groups in an embedding -----------------------------------------------------------------------


def separation(x: np.ndarray, labels) -> float:
    """Silhouette score (scikit-learn, cosine) of ``labels`` in the embedding space: 1 = well separated
    groups, 0 = overlapping, < 0 = mixed. NaN with fewer than two groups."""
    from sklearn.metrics import silhouette_score

    labels = np.asarray([str(v) for v in labels])
    if len(set(labels)) < 2 or len(set(labels)) >= len(labels):
        return float("nan")
    return float(silhouette_score(x, labels, metric="cosine"))


def embedding_frame(coords: np.ndarray, meta: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(
        [pd.DataFrame(coords, columns=["x", "y"]), meta.reset_index(drop=True)], axis=1
    )
