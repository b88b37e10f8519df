"""LAVE judge benchmark (``make bench``): writes outputs/bench/judge.json.

The LAVE prompt is its task definition and eight demonstrations before each question, so a local
judge (the hf backend) spends most of its time re-encoding the same prefix. ``lave_prefix_speedup``:
``N`` judge requests (a quarter yes/no questions, the rest open; both demonstration sets) to
SmolLM2, 48 new tokens, batch 8, with the shared prefix encoded once (``prefix_cache``, the
default) vs every row encoded whole, ``REPS`` times each on fresh models, medians and their
ratio; the judge's outputs must be identical (``TARGETS``).
"""

from __future__ import annotations

import statistics
import time

from benchmarks.records import host_state, record
from lib.families.lave import judge as lave
from lib.models import generate, load_model

N, REPS, MAX_NEW_TOKENS = 16, 3, 48
# the prefix cache must pay for itself and change nothing the judge says
TARGETS = {"lave_prefix_speedup": ">= 1.2", "identical_outputs": "== true"}


def requests():
    open_qs = [
        ("What color is the {}?", ["red", "red", "dark red"], "red"),
        ("What is on the {}?", ["a cup"] * 3, "cup"),
        ("How many {} are there?", ["2", "2", "3"], "three"),
    ]
    yes_no = ("Is there a {}?", ["yes"] * 3, "no")
    things = [
        "car",
        "table",
        "dog",
        "bench",
        "boat",
        "sign",
        "kite",
        "bus",
        "tree",
        "chair",
        "lamp",
        "cake",
    ]
    rows = [yes_no if i % 4 == 0 else open_qs[i % 3] for i in range(N)]
    return lave.judge_requests(
        [q.format(things[i % len(things)]) for i, (q, _, _) in enumerate(rows)],
        [r for _, r, _ in rows],
        [c for _, _, c in rows],
        max_new_tokens=MAX_NEW_TOKENS,
    )


def timed(prefix_cache: bool, reqs) -> tuple[float, list[str]]:
    model = load_model(
        {"backend": "tiny", "name": "smollm2", "prefix_cache": prefix_cache, "batch_size": 8}
    ).load()
    start = time.perf_counter()
    out = generate(model, reqs, progress=False)
    return time.perf_counter() - start, [r.text for r in out]


def main() -> dict:
    before = host_state()
    reqs = requests()
    runs = {flag: [timed(flag, reqs) for _ in range(REPS)] for flag in (False, True)}
    plain, cached = (statistics.median(s for s, _ in runs[f]) for f in (False, True))
    texts = {f: {tuple(t) for _, t in runs[f]} for f in runs}
    result = {
        "requests": N,
        "max_new_tokens": MAX_NEW_TOKENS,
        "reps": REPS,
        "plain_seconds": round(plain, 2),
        "prefix_cache_seconds": round(cached, 2),
        "lave_prefix_speedup": round(plain / cached, 2),
        "identical_outputs": len(texts[False] | texts[True]) == 1,
    }
    return record("judge", result, before, TARGETS)


if __name__ == "__main__":
    main()
