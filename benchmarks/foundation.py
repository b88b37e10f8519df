"""Foundation benchmarks: batching, the call cache and API concurrency (the README quotes them).

    make bench            # or: python -m benchmarks.foundation

Each figure is a ratio of medians measured in this one run (these machines are noisy), written to
``outputs/bench/foundation.json`` with the machine it ran on.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from benchmarks.records import host_state, record
from lib.io.provenance import versions
from lib.models import Request, generate, load_model
from lib.models.store import CallStore

N = 64
REPEATS = 3
HEADLINE_TOKENS = 16
# what batching, the call cache and client concurrency must buy, what log-likelihood choices may cost
# beside trie decoding, and that neither batching nor the cache changes an answer
TARGETS = {
    "hf_batch_speedup": ">= 4",
    "cache_speedup": ">= 50",
    "api_concurrency_speedup": ">= 10",
    "loglik_overhead": "<= 1.5",
    "hf_same_greedy_outputs": "== true",
    "cache_all_hits": "== true",
}


def _images(folder: Path, n: int) -> list[Path]:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        p = folder / f"bench{i}.png"
        Image.fromarray(rng.integers(0, 256, (96, 128, 3), dtype=np.uint8)).save(p)
        paths.append(p)
    return paths


def _median_time(fn, repeats: int = REPEATS) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def _requests(images: list[Path], max_new_tokens: int) -> list[Request]:
    return [
        Request.simple(f"Question {i}: what is in the image?", [img], max_new_tokens=max_new_tokens)
        for i, img in enumerate(images)
    ]


def hf_and_cache(images: list[Path], spec: dict) -> dict:
    """Batch 16 vs one at a time (same greedy outputs), and a cached rerun vs the first run.

    The headline uses ``max_new_tokens=16`` (lmms-eval's short-answer VQAv2 setting); the curve over
    1-16 tokens shows how the gain grows with decoding length, since per-image preprocessing and
    the prefill are a fixed cost that batching shares less well than decoding steps.
    """
    model = load_model(spec).load()
    generate(model, _requests(images[:16], 4), batch_size=16, progress=False)  # warm-up allocations
    curve, same = {}, True
    for tokens in (1, 4, 8, HEADLINE_TOKENS):
        reqs = _requests(images, tokens)
        t_single, single = _median_time(lambda: generate(model, reqs, batch_size=1, progress=False))  # noqa: B023 - called within this iteration
        t_batch, batched = _median_time(
            lambda: generate(model, reqs, batch_size=16, progress=False)  # noqa: B023 - called within this iteration
        )
        same &= [r.text for r in single] == [r.text for r in batched]
        curve[tokens] = {
            "batch1_seconds": round(t_single, 3),
            "batch16_seconds": round(t_batch, 3),
            "speedup": round(t_single / t_batch, 2),
        }

    reqs = _requests(images, HEADLINE_TOKENS)
    with tempfile.TemporaryDirectory() as tmp:
        store = CallStore(Path(tmp) / "calls.sqlite")
        start = time.perf_counter()
        first = generate(model, reqs, store=store, batch_size=16, progress=False)
        t_first = time.perf_counter() - start
        t_cached, cached = _median_time(
            lambda: generate(model, reqs, store=store, batch_size=16, progress=False)  # noqa: B023 - called within this iteration
        )
    return {
        "hf_batch_speedup": curve[HEADLINE_TOKENS]["speedup"],
        "hf_max_new_tokens": HEADLINE_TOKENS,
        "hf_same_greedy_outputs": same,
        "hf_by_max_new_tokens": curve,
        "cache_speedup": round(t_first / t_cached, 1),
        "cache_first_seconds": round(t_first, 3),
        "cache_hit_seconds": round(t_cached, 4),
        "cache_all_hits": cached.n_cached == N
        and [r.text for r in cached] == [r.text for r in first],
    }


def api_concurrency(delay_s: float = 0.2) -> dict:
    from tests.support.openai_server import OpenAIStub

    with OpenAIStub(delay_s=delay_s) as server:

        def run(concurrency: int, tag: str):
            model = load_model(
                {
                    "backend": "openai",
                    "name": "stub",
                    "base_url": server.url,
                    "concurrency": concurrency,
                    "batch_size": N,
                }
            )
            reqs = [Request.simple(f"{tag} request {i}") for i in range(N)]
            start = time.perf_counter()
            generate(model, reqs, progress=False)  # no store: every call reaches the server
            return time.perf_counter() - start

        t1 = statistics.median(run(1, f"c1-{k}") for k in range(1))  # 12.8 s each: once is enough
        t16 = statistics.median(run(16, f"c16-{k}") for k in range(REPEATS))
    return {
        "api_concurrency_speedup": round(t1 / t16, 2),
        "api_c1_seconds": round(t1, 2),
        "api_c16_seconds": round(t16, 3),
        "api_added_latency_s": delay_s,
    }


def loglik_overhead(images: list[Path], spec: dict) -> dict:
    """Log-likelihood choices (one prefill per question, then every option from its cache) against
    trie-constrained decoding on the same 4-option questions, batch 16; and the log-likelihood cost
    per question for 2, 4 and 8 options."""
    from lib.models import Constraint, generate, load_model

    model = load_model(spec)
    letters = "ABCDEFGH"

    def questions(k: int, method: str) -> list[Request]:
        c = Constraint(choices=tuple(letters[:k]), method=method)
        return [
            Request.simple(
                f"Question {i}: which option is right? " + ", ".join(letters[:k]),
                [img],
                constraint=c,
            )
            for i, img in enumerate(images)
        ]

    generate(model, questions(4, "trie")[:2], progress=False)  # load and warm up
    trie, _ = _median_time(
        lambda: generate(model, questions(4, "trie"), batch_size=16, progress=False)
    )
    per_k = {
        k: _median_time(
            lambda k=k: generate(model, questions(k, "loglik"), batch_size=16, progress=False)
        )[0]
        for k in (2, 4, 8)
    }
    return {
        "loglik_overhead": round(per_k[4] / trie, 2),
        "trie_4_options_s": round(trie, 3),
        "loglik_ms_per_question": {k: round(1000 * v / len(images), 2) for k, v in per_k.items()},
    }


def main() -> dict:
    before = host_state()
    spec = {"backend": "tiny", "name": "llava"}
    with tempfile.TemporaryDirectory() as tmp:
        images = _images(Path(tmp), N)
        result = {
            "requests": N,
            "model": spec,
            **hf_and_cache(images, spec),
            **loglik_overhead(images, spec),
            **api_concurrency(),
        }
    import torch

    # record() adds the platform, the CPU model, the cores and the load
    result["machine"] = {
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    result["versions"] = versions()
    return record("foundation", result, before, TARGETS)


if __name__ == "__main__":
    main()
