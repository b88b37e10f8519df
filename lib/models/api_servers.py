"""The servers of an ``openai`` spec (:mod:`lib.models.api`): its ``base_url`` checked, the pool
that picks the server of each attempt (the fewest in flight, a failed one cooled down), and the
client whose attempts go where the pool says, each within ``timeout_s``. The module docstring of
:mod:`lib.models.api` says how several servers of one model are used."""

from __future__ import annotations

import asyncio
import contextvars

from lib.config import ParamsError, short
from lib.models.openai_format import grammar_failure

# A server that failed an attempt is passed over for this many of the spec's next attempts: a dead
# server then costs one failed attempt now and then, not one per request, and a restarted one is
# back within a batch. Counted in attempts, never seconds (time on these machines says little).
COOLDOWN_REQUESTS = 16
# What a list's fingerprint holds where a single server's holds its URL (see the module docstring).
ANY_LISTED_SERVER = "<any listed server>"


def check_base_url(value, where: str) -> None:
    """An ``openai`` spec's ``base_url``: one server's URL (a string, as always), or a list of the
    URLs of interchangeable servers of one model (non-empty strings, each once)."""
    if value is None or isinstance(value, str):
        return
    if not isinstance(value, list) or not value:
        raise ParamsError(
            f"{where}.base_url must be a server's URL or a non-empty list of them "
            f"(servers of one model), got {short(value)}"
        )
    for i, url in enumerate(value):
        if not isinstance(url, str) or not url.strip():
            raise ParamsError(
                f"{where}.base_url[{i}] must be a server's URL (e.g. http://127.0.0.1:8000/v1), "
                f"got {short(url)}"
            )
        if url in value[:i]:
            raise ParamsError(f"{where}.base_url lists {url!r} twice: list each server once")


def base_urls(spec: dict) -> list[str]:
    """The servers of an ``openai`` spec: none (api.openai.com), its one ``base_url``, or its list."""
    base = spec.get("base_url")  # checked by the spec's check (check_base_url)
    return list(base) if isinstance(base, list) else [base] if base else []


class ServerPool:
    """Which of a spec's servers takes an attempt (see the module docstring): the fewest in
    flight, ties to the first; a request's untried servers before the others; a server that failed
    passed over for ``cooldown`` picks. Plain counters, used from one event loop at a time."""

    def __init__(self, n: int, cooldown: int = COOLDOWN_REQUESTS):
        self.n, self.cooldown = n, cooldown
        self.in_flight = [0] * n
        self.sent = [0] * n  # attempts sent to each server
        self.failures = [0] * n
        self.picks = 0
        self._cool_until = [0] * n  # a server is passed over until the pick count exceeds this

    def pick(self, tried=()) -> int:
        """The server for an attempt of a request that has already tried the servers ``tried``."""
        self.picks += 1
        pool = [i for i in range(self.n) if i not in tried] or list(range(self.n))
        ready = [i for i in pool if self._cool_until[i] < self.picks]
        i = (
            min(ready, key=lambda i: (self.in_flight[i], i))
            if ready
            else min(pool, key=lambda i: (self._cool_until[i], self.in_flight[i], i))
        )
        self.sent[i] += 1
        return i

    def failed(self, i: int) -> None:
        self.failures[i] += 1
        self._cool_until[i] = self.picks + self.cooldown


# The servers the request being sent has tried (one set per request: each runs in its own task).
TRIED: contextvars.ContextVar[set] = contextvars.ContextVar("tried_servers")


def _async_openai():
    """The openai client class, refused when it lacks the hooks every attempt goes through."""
    import openai
    from openai import AsyncOpenAI

    # the hooks each attempt goes through (httpx2 clients)
    if not all(hasattr(AsyncOpenAI, hook) for hook in ("_send_request", "_sleep_for_retry")):
        raise RuntimeError(
            f"openai {openai.__version__} is too old for the per-attempt deadline (timeout_s) and "
            f"the choice of server; upgrade it: pip install -U openai"
        )
    return AsyncOpenAI


def routed_client(pool: ServerPool, bases: list[str], deadline_s: float):
    """An ``AsyncOpenAI`` subclass whose every attempt goes to the server ``pool`` picks (``bases``:
    the servers' URLs, each ending in ``/``) and ends within ``deadline_s``, its body included; a
    grammar failure is not retried, and the backoff starts once every server has been tried."""
    AsyncOpenAI = _async_openai()  # noqa: N806 - a class, named as one
    import httpx2  # what the openai client sends with, and whose timeouts it retries

    class Client(AsyncOpenAI):
        # the openai client's retry rule, minus grammar failures
        def _should_retry(self, response) -> bool:
            return not grammar_failure(response) and super()._should_retry(response)

        async def _sleep_for_retry(self, *, retries_taken: int, **kwargs) -> None:
            tried = TRIED.get(None)
            # a server it has not tried takes it at once
            if tried is not None and len(tried) < pool.n:
                return
            # then one server's backoff: the attempts that went round the servers do not lengthen it
            await super()._sleep_for_retry(
                retries_taken=max(0, retries_taken - (pool.n - 1)), **kwargs
            )

        async def _send_request(self, request, **kwargs):
            tried = TRIED.get(None)
            tried = set() if tried is None else tried
            i = pool.pick(tried)
            tried.add(i)
            # the client built the request for the first server's URL: send it to server i
            if i:
                own, url = str(self.base_url), str(request.url)
                if not url.startswith(own):
                    raise RuntimeError(f"cannot route {url} to {bases[i]}: it is not under {own}")
                request.url = httpx2.URL(bases[i] + url[len(own) :])
                request.headers["Host"] = request.url.netloc.decode("ascii")
            pool.in_flight[i] += 1
            # One attempt, body included, within timeout_s: the client's timeout bounds each read,
            # so a body dripped a byte at a time would never end. A timeout is retried as any is.
            try:
                async with asyncio.timeout(deadline_s):
                    response = await super()._send_request(request, **kwargs)
            except TimeoutError:
                pool.failed(i)
                raise httpx2.ReadTimeout(
                    f"no whole reply within timeout_s={deadline_s:g}s", request=request
                ) from None
            except Exception:  # refused, reset: the client retries these
                pool.failed(i)
                raise
            finally:
                pool.in_flight[i] -= 1
            # 429, 5xx: retried elsewhere
            if response.status_code >= 400 and self._should_retry(response):
                pool.failed(i)
            return response

    return Client
