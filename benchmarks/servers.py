"""Several servers behind one spec (``make bench``): writes outputs/bench/servers.json.

Data parallelism's figure: requests per second through one ``openai`` spec listing two local stub
servers (``tests/support/openai_server.py``) vs listing one. Each stub serves at most ``CAPACITY``
requests at once, each after ``SERVICE_S`` (a sleep: what is measured is how the spec spreads its
requests, not what a model computes), so one server tops out at ``CAPACITY / SERVICE_S``. Both runs
keep the same number of requests in flight (``IN_FLIGHT``: ``concurrency`` is per server), so the
second server, not more client concurrency, is what differs. ``REPS`` runs of ``N`` requests each,
medians. The headline is their ratio, ``two_server_speedup`` (2 at best: the client and both
servers share this process's cores), never the seconds; its target (``TARGETS``) is that two servers
carry at least 1.6 times one server's requests per second, each of them taking a share.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.records import host_state, record
from lib.models import Request, generate, load_model

N, REPS = 32, 7  # 7 runs: with 3 the median ratio moved 1.57-1.70 between idle runs
CAPACITY = 4  # requests a stub serves at once (a GPU's batch slots)
SERVICE_S = 0.1  # per request: long beside the client's own per-request work, so the servers are the bottleneck
IN_FLIGHT = 2 * CAPACITY  # enough to fill two servers; one server queues the rest
# two servers' throughput at least 1.6 x one server's (the ratio's ceiling is 2), and the requests
# spread: each server takes at least a third of them (an even spread gives each half)
TARGETS = {
    "two_server_speedup": ">= 1.6",
    "two_server_requests_per_server[0]": f">= {N * REPS // 3}",
    "two_server_requests_per_server[1]": f">= {N * REPS // 3}",
}


def requests_per_s(urls: list[str], tag: str) -> float:
    model = load_model(
        {
            "backend": "openai",
            "name": "stub",
            "base_url": urls,
            "concurrency": IN_FLIGHT // len(urls),
            "batch_size": N,
            "max_retries": 0,
        }
    )
    reqs = [Request.simple(f"{tag} request {i}") for i in range(N)]
    model.server_identity()  # each server's GET /models, asked once before the clock starts
    start = time.perf_counter()
    answers = generate(model, reqs, progress=False)  # no store: every call reaches a server
    seconds = time.perf_counter() - start
    assert all(a.valid for a in answers), [a.error for a in answers if not a.valid][:3]
    return N / seconds


def main() -> dict:
    from tests.support.openai_server import OpenAIStub

    before = host_state()
    with (
        OpenAIStub(delay_s=SERVICE_S, capacity=CAPACITY) as a,
        OpenAIStub(delay_s=SERVICE_S, capacity=CAPACITY) as b,
    ):
        one = [requests_per_s([a.url], f"one-{k}") for k in range(REPS)]
        served_before = len(a.bodies)
        two = [requests_per_s([a.url, b.url], f"two-{k}") for k in range(REPS)]
        shares = [len(a.bodies) - served_before, len(b.bodies)]
    r1, r2 = statistics.median(one), statistics.median(two)
    result = {
        "servers": f"OpenAIStub, {CAPACITY} requests at once, {SERVICE_S} s each (a sleep), 127.0.0.1",
        "requests": N,
        "reps": REPS,
        "in_flight": IN_FLIGHT,
        "two_server_speedup": round(r2 / r1, 2),
        "requests_per_s_one_server": round(r1, 1),
        "requests_per_s_two_servers": round(r2, 1),
        "one_server_ceiling_requests_per_s": CAPACITY / SERVICE_S,
        "two_server_requests_per_server": shares,
        "all_runs": {"one": [round(x, 1) for x in one], "two": [round(x, 1) for x in two]},
    }
    return record("servers", result, before, TARGETS)


if __name__ == "__main__":
    main()
