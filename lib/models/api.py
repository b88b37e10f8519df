"""The ``openai`` backend: any OpenAI-compatible chat endpoint (OpenAI, vLLM, other providers).

Spec keys::

    {backend: openai, name: gpt-4o-mini,          # the model name the server knows
     base_url: http://127.0.0.1:8000/v1,          # omit for api.openai.com; a vLLM server's /v1,
                                                  # or a list of them: several servers of one model
     api_key_env: OPENAI_API_KEY,                 # the NAME of the variable holding the key
     concurrency: 16, max_retries: 5, timeout_s: 60,
     price_per_1m_input: 0.15, price_per_1m_output: 0.60}   # USD, for the cost column

    {backend: openai, endpoint: images, name: dall-e-3, size: 1024x1024, price_per_image: 0.04}

With ``endpoint: images`` the model is an images API (``images.generate``): a request's last text
is the prompt, and the response's ``text`` names the PNG it returned, stored once by content hash
under ``outputs/cache/images/`` (:func:`response_image` opens it). Such calls go through the call
cache like any other, so a prompt is paid for once; ``price_per_image`` fills the cost column.

The key's value is read from the environment at call time and never stored in params, responses,
the call cache or logs. Requests run concurrently (asyncio, at most ``concurrency`` in flight);
HTTP 429 and 5xx answers and timeouts are retried with exponential backoff and jitter by the openai client itself
(``max_retries``). ``timeout_s`` bounds each attempt as a whole - connecting, waiting and reading a
body however slowly it drips in (the client's own timeout bounds each read only) - and an attempt
past it is retried like any timeout. A call that still fails is recorded as ``method="error"`` with
the error text and the rest of the batch completes. Images travel as base64 data URLs of the
original file bytes (the wire format: :mod:`lib.models.openai_format`; the servers and the
client that routes each attempt: :mod:`lib.models.api_servers`).

Whatever one reply holds fails that item only. Content that is not text (a list, a number, an
object) is an error of the item, kept as JSON with the reason in ``error``. A reply longer than
:data:`~lib.core.answers.MAX_REPLY_CHARS` is cut there and counted as truncated (``finish_reason:
"length"``, the reason in ``problem``). A reply that cannot be read (JSON nested too deep, off its
schema) is invalid, kept raw, with the reason in ``problem``.

Choices and JSON schemas are sent as ``response_format`` json_schema (vLLM and OpenAI enforce it);
the answer is then parsed and checked again here against the same schema, and kept raw and marked
invalid when it does not conform. Every schema the project sends passes
:func:`~lib.models.openai_format.schema_problems` (it compiles on vLLM's xgrammar and guidance
engines alike); a 500 whose body names a grammar failure is not retried (the same schema fails the
same way every time).

Several servers, one model (data parallelism: one vLLM per GPU or node): ``base_url`` may be a
list of their URLs. Each attempt goes to the server with the fewest requests in flight (ties to
the first listed); ``concurrency`` counts per server, so the spec keeps ``concurrency`` x servers
in flight. An attempt that fails the way the client retries (connection refused, a timeout, 429,
5xx) moves at once to a server this request has not tried yet; once every server has failed it,
the client's own retries go on (``max_retries``, with backoff), each again to the least busy
server: at most servers + ``max_retries`` attempts (a single URL: 1 + ``max_retries``, as ever).
A server that failed an attempt is passed over for the spec's next :data:`COOLDOWN_REQUESTS`
attempts (a count, not seconds); when every server is cooling down, the one whose cool-down ends
first is asked.

The call cache knows a server by its spec (``name``, ``base_url``, ``label``...) and, for a
``base_url`` server that answers ``GET /models``, by what the server says about the model it
serves (``id``, ``root``: the weights' folder, ``max_model_len``): a different checkpoint behind
the same URL and name gets new cache keys. Engine flags are not visible there (the
structured-output backend, ``disable_any_whitespace``, dtype): set the spec's ``label`` when
they change. The servers of a list are interchangeable, so a list's fingerprint holds no URL: it
is the model (``name``, ``label``...), what the servers say they serve (listed servers that say
different things are refused: give each its own spec) and the mark :data:`ANY_LISTED_SERVER` -
the same keys whichever server answers, in any order, with servers added or dropped. A single
``base_url`` string keeps its URL in the fingerprint as it always has (existing caches stay
valid), so a list does not reuse a single-URL spec's cached answers; a one-item list is how one
server gets URL-free keys.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path

from lib.config import ParamsError
from lib.core.answers import cap_reply, not_text
from lib.core.paths import cache_dir
from lib.core.schema import ERROR, FREE, INVALID, Request, Response, fingerprint
from lib.models.api_servers import (
    ANY_LISTED_SERVER,
    TRIED,
    ServerPool,
    base_urls,
    check_base_url,
    routed_client,
)
from lib.models.backend import Model, backend
from lib.models.openai_format import (
    chat_request,
    completion_parts,
    last_text,
    read_reply,
)
from lib.models.probe import server_problem

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def response_image(response: Response):
    """The image an images-endpoint response names (a PIL image)."""
    from PIL import Image

    if response.method == ERROR or not response.text:
        raise ValueError(f"the images API gave no image: {response.error or 'empty response'}")
    return Image.open(cache_dir() / response.text).convert("RGB")


@backend("openai")
class OpenAIModel(Model):
    """An OpenAI-compatible endpoint behind the common interface (see the module docstring)."""

    SPEC_KEYS = frozenset(
        {
            "base_url",
            "api_key_env",
            "concurrency",
            "max_retries",
            "timeout_s",
            "batch_size",
            "revision",
            "price_per_1m_input",
            "price_per_1m_output",
            "price_per_image",
            "endpoint",
            "size",
        }
    )

    @classmethod
    def check_spec(cls, spec: dict, where: str) -> None:
        super().check_spec(spec, where)
        cls._needs_name(spec, where)
        check_base_url(spec.get("base_url"), where)
        env = spec.get("api_key_env")
        if env is not None and not (isinstance(env, str) and _ENV_NAME.match(env)):
            raise ParamsError(
                f"{where}.api_key_env must name an environment variable (letters, digits, _), not hold "
                f"a key; the value given is not shown"
            )

    @classmethod
    def preflight(cls, spec: dict, offline: bool) -> str | None:
        """Its key variable set and every server answering (:func:`server_problem`)."""
        return server_problem(spec)

    def __init__(self, spec: dict):
        super().__init__(spec)  # checked by check_spec (lib.models.load_model)
        self.urls = base_urls(spec)
        self.pool = ServerPool(max(1, len(self.urls)))
        self.concurrency = int(spec.get("concurrency", 16))  # per server
        self.batch_size = int(spec.get("batch_size", 4 * self.concurrency * self.pool.n))
        self._identity: dict | None = None

    @property
    def fingerprint(self) -> str:
        # Prices and throughput knobs do not change answers; the endpoint, the model and the weights
        # the server says it serves do.
        keep = {
            k: v
            for k, v in self.spec.items()
            if k in ("backend", "name", "base_url", "revision", "label", "endpoint", "size")
        }
        # interchangeable servers: not which, nor how many
        if isinstance(self.spec.get("base_url"), list):
            keep["base_url"] = ANY_LISTED_SERVER
        served = self.server_identity()
        if served:
            keep["served"] = served
        return fingerprint(keep)

    def server_identity(self) -> dict:
        """What the ``base_url`` servers' ``GET /models`` say about this model (``id``, ``root``,
        ``max_model_len``; vLLM gives all three), asked once; empty when there is no ``base_url``,
        or no server answers or lists the model. Listed servers that say different things are refused."""
        if self._identity is None:
            said = (
                {}
                if self.spec.get("endpoint") == "images"
                else {url: self._served_by(url) for url in self.urls}
            )
            said = {url: identity for url, identity in said.items() if identity}
            if len({json.dumps(v, sort_keys=True) for v in said.values()}) > 1:
                raise ValueError(
                    f"model {self.name!r}: the servers of base_url serve different models ("
                    + "; ".join(f"{url}: {v}" for url, v in said.items())
                    + "): the servers of one spec must serve the same weights; give each its own spec"
                )
            self._identity = next(iter(said.values()), {})
        return self._identity

    def _served_by(self, base: str) -> dict:
        """What the server at ``base`` says about this model: empty if it does not answer or list it."""
        from openai import OpenAI, OpenAIError

        try:
            with OpenAI(
                base_url=base,
                api_key=self._api_key(),
                max_retries=1,
                timeout=float(self.spec.get("timeout_s", 60)),
            ) as client:
                listed = [m.model_dump() for m in client.models.list()]
        except (OpenAIError, ValueError, TypeError, AttributeError):
            listed = []
        for m in listed:
            if m.get("id") == self.spec.get("name"):
                return {k: m[k] for k in ("id", "root", "max_model_len") if m.get(k) is not None}
        return {}

    def _api_key(self) -> str:
        env = self.spec.get("api_key_env", "OPENAI_API_KEY")
        key = os.environ.get(env)
        if key:
            return key
        if self.spec.get("base_url"):  # local servers (vLLM without --api-key) accept any key
            return "EMPTY"
        raise RuntimeError(
            f"model {self.name!r}: environment variable {env} (named by the spec's api_key_env) "
            f"is not set; export it, or set base_url to a local server"
        )

    def _load(self) -> None:
        self._api_key()  # fail before any request when no key is reachable

    def _client(self):
        """The async client of this spec's servers (:func:`lib.models.api_servers.routed_client`)."""
        pool, bases = self.pool, [url.rstrip("/") + "/" for url in self.urls]
        client_class = routed_client(pool, bases, float(self.spec.get("timeout_s", 60)))
        # servers - 1 attempts more than one server's, for trying each server once first
        return client_class(
            base_url=self.urls[0] if self.urls else None,
            api_key=self._api_key(),
            max_retries=int(self.spec.get("max_retries", 5)) + pool.n - 1,
            timeout=float(self.spec.get("timeout_s", 60)),
        )

    def _redact(self, text: str) -> str:
        """``text`` without the key's value (servers echo it in their errors; it must not reach disk)."""
        key = os.environ.get(self.spec.get("api_key_env", "OPENAI_API_KEY"))
        return text.replace(key, "<redacted>") if key and len(key) >= 4 else text

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * float(self.spec.get("price_per_1m_input", 0))
            + completion_tokens * float(self.spec.get("price_per_1m_output", 0))
        ) / 1e6

    async def _image(self, client, r: Request) -> Response:
        start = time.perf_counter()
        try:
            result = await client.images.generate(
                model=self.spec["name"],
                prompt=last_text(r),
                size=self.spec.get("size", "1024x1024"),
                response_format="b64_json",
                n=1,
            )
        except Exception as e:  # after the client's own retries
            return Response(
                text="",
                method=ERROR,
                valid=False,
                error=self._redact(f"{type(e).__name__}: {e}"),
                latency_s=time.perf_counter() - start,
            )
        raw = base64.b64decode(result.data[0].b64_json)
        name = f"images/{hashlib.sha256(raw).hexdigest()}.png"
        path = cache_dir("images") / Path(name).name
        if not path.exists():
            path.write_bytes(raw)
        return Response(
            text=name,
            parsed=name,
            method=FREE,
            latency_s=time.perf_counter() - start,
            cost_usd=float(self.spec.get("price_per_image", 0)),
        )

    async def _one(self, client, sem: asyncio.Semaphore, r: Request) -> Response:
        TRIED.set(set())  # this request's own (each request runs in its own task)
        async with sem:
            if self.spec.get("endpoint") == "images":
                return await self._image(client, r)
            return await self._chat(client, r)

    async def _chat(self, client, r: Request) -> Response:
        """One chat completion: an error of the call or of what came back fails this request only."""
        start = time.perf_counter()
        kwargs = chat_request(self.spec["name"], r)
        try:
            completion = await client.chat.completions.create(**kwargs)
        except Exception as e:  # after the client's own retries: record, do not sink the batch
            return Response(
                text="",
                parsed=None,
                method=ERROR,
                valid=False,
                error=self._redact(f"{type(e).__name__}: {e}"),
                latency_s=time.perf_counter() - start,
            )
        latency = time.perf_counter() - start
        try:  # a 200 that is no chat completion (an HTML page, choices: []) fails this request only
            content, finish, pt, ct = completion_parts(completion)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as e:
            return Response(
                text="",
                method=ERROR,
                valid=False,
                latency_s=latency,
                error=self._redact(
                    f"not a chat completion ({type(e).__name__}: {e}): {str(completion)[:200]!r}"
                ),
            )
        usage_fields = dict(
            prompt_tokens=pt,
            completion_tokens=ct,
            latency_s=latency,
            cost_usd=self._cost(pt, ct),
        )
        return self._read_content(content, finish, r, kwargs.get("response_format"), usage_fields)

    def _read_content(
        self, content, finish: str | None, r: Request, fmt, usage_fields: dict
    ) -> Response:
        """A completion's content as a response: content that is not text an error kept as JSON, a
        reply past the length cap cut and counted as truncated, the reply read as ``r`` asks (a
        parser's failure fails this item only)."""
        is_text = content is None or isinstance(content, str)
        raw, error = (content or "", None) if is_text else not_text(content)
        # redacted whole: a cut must not keep part of a key
        text, problem = cap_reply(self._redact(raw))
        if error:  # a list, a number, an object: no answer, kept as JSON
            return Response(
                text=text,
                method=ERROR,
                valid=False,
                error="; ".join(x for x in (error, problem) if x),
                finish_reason=finish,
                **usage_fields,
            )
        if problem:  # cut like a reply that hit the token limit, and counted with them
            problem += f"; the server's finish_reason was {finish!r}"
            finish = "length"
        try:
            parsed, method, valid, unread = read_reply(text, r, fmt)
        except Exception as e:  # whatever one reply does to a parser fails that item only
            parsed, method, valid, unread = (
                None,
                INVALID,
                False,
                f"unreadable ({type(e).__name__})",
            )
        problem = "; ".join(x for x in (problem, unread) if x) or None
        return Response(
            text=text,
            parsed=parsed,
            method=method,
            valid=valid,
            finish_reason=finish,
            problem=problem,
            **usage_fields,
        )

    async def _run(self, requests: list[Request], on_result) -> list[Response]:
        sem = asyncio.Semaphore(self.concurrency * self.pool.n)
        out: list[Response | None] = [None] * len(requests)
        async with self._client() as client:

            async def task(i: int, r: Request) -> None:
                out[i] = await self._one(client, sem, r)
                if on_result:
                    on_result(i, out[i])

            await asyncio.gather(*(task(i, r) for i, r in enumerate(requests)))
        return out  # type: ignore[return-value]

    def _generate(self, requests: list[Request], on_result) -> list[Response]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._run(requests, on_result))
        # Inside Jupyter an event loop is already running: run ours in a worker thread.
        box: dict = {}

        def work() -> None:
            try:
                box["out"] = asyncio.run(self._run(requests, on_result))
            except BaseException as e:  # re-raised in the caller's thread
                box["err"] = e

        t = threading.Thread(target=work)
        t.start()
        t.join()
        if "err" in box:
            raise box["err"]
        return box["out"]
