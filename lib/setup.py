"""Stage 00 · Setup: build the embedded models, write sample images, probe every model once.

Run first (``make run`` does): it writes the demo's sample photographs (:func:`lib.io.write_sample_images`), builds each model of the profile once into ``outputs/cache/``
(tiny VLMs from configs, SmolLM2 converted from GGUF), then sends a few constrained requests to
each through the call cache, so a broken environment, a wrong model path or an unreachable
endpoint shows up in seconds here instead of an hour into stage 03.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from lib.models import Constraint, Request, generate, load_model
from lib.store import CallStore

def probe_requests(images: list[Path], vision: bool) -> list[Request]:
    """A handful of constrained questions (choices by trie and by log-likelihood, and JSON)."""
    yes_no = Constraint(choices=("yes", "no"))
    imgs = lambda i: [images[i % len(images)]] if vision else []  # noqa: E731
    return [
        Request.simple("Is there a person in the image? Answer yes or no.", imgs(0), constraint=yes_no),
        Request.simple("Is this a photograph of a cat? Answer yes or no.", imgs(2), constraint=yes_no),
        Request.simple("Which colour dominates: red, green or blue?", imgs(1),
                       constraint=Constraint(choices=("red", "green", "blue"), method="loglik")),
        Request.simple("Describe the image in a few words." if vision else "Name a colour.", imgs(3), max_new_tokens=12),
    ]


def probe_models(specs: dict[str, dict], images: list[Path], store: CallStore) -> pd.DataFrame:
    """Load each model, answer the probe requests through the cache; one row per answer."""
    rows = []
    for label, spec in specs.items():
        model = load_model(spec)
        start = time.perf_counter()
        model.load()
        load_s = time.perf_counter() - start
        vision = getattr(model, "is_vlm", True)
        requests = probe_requests(images, vision)
        responses = generate(model, requests, store=store, desc=f"probe {label}")
        n_params = sum(p.numel() for p in model.model.parameters()) if getattr(model, "model", None) is not None else None
        for req, resp in zip(requests, responses):
            rows.append({
                "model": label, "backend": spec["backend"], "parameters": n_params, "load_s": round(load_s, 2),
                "question": req.messages[-1]["content"][-1]["text"], "raw": resp.text, "parsed": resp.parsed,
                "method": resp.method, "valid": resp.valid, "cached": resp.cached, "latency_s": round(resp.latency_s, 3),
            })
    return pd.DataFrame(rows)
