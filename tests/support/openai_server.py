"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks (aiohttp).

It answers ``POST /v1/chat/completions`` after ``delay_s``. Markers in the last user message script
failures, per distinct message: ``[[429x2]]`` / ``[[500x1]]`` fail that many attempts first,
``[[timeoutx1]]`` stalls that many attempts past any client timeout, ``[[always500]]`` never
succeeds, ``[[malformed]]`` returns broken JSON for a structured request, ``[[reply:TEXT]]`` answers
exactly TEXT (a scripted model, garbage included), ``[[html]]`` answers 200 with an HTML page (a
``base_url`` without ``/v1``), ``[[nochoices]]`` a completion with ``choices: []``, ``[[length]]``
a reply cut off by the token limit (``finish_reason: length``), ``[[echo401]]`` a 401 whose message
repeats the Authorization header (as some servers do), ``[[echokey]]`` a reply that does,
``[[grammar500]]`` the 500 vLLM answers when its grammar engine cannot compile the request's schema.
Otherwise a structured request gets ``{"answer": <first enum value>}`` and a free one
``echo: <text>``. ``POST /v1/images/generations`` returns a small PNG (the images API of the
style-variant stage). ``GET /v1/models`` lists ``models`` (vLLM's fields: id, root,
max_model_len) when given, else answers 404 as servers without the route do.

Two settings make it one of several servers behind a spec: ``status`` (e.g. 500) answers every
chat request with that HTTP status, a broken server (attempts still counted); ``capacity`` serves
at most that many requests at once, the rest waiting their turn, as a GPU's batch slots do (without
it ``delay_s`` is served to any number of requests at once).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter

from aiohttp import web

_MARK = re.compile(r"\[\[(429|500|timeout)x(\d+)\]\]")
_REPLY = re.compile(r"\[\[reply:(.*?)\]\]", re.DOTALL)


class OpenAIStub:
    def __init__(
        self,
        delay_s: float = 0.0,
        stall_s: float = 30.0,
        models: list[dict] | None = None,
        status: int | None = None,
        capacity: int | None = None,
    ):
        self.delay_s, self.stall_s, self.models = delay_s, stall_s, models
        self.status, self.capacity = status, capacity
        self._slots: asyncio.Semaphore | None = None  # made in the server's own loop
        self.attempts: Counter = Counter()
        self.auth_headers: set[str] = set()
        self.bodies: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self.url = ""

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        self.auth_headers.add(request.headers.get("Authorization", ""))
        last = body["messages"][-1]["content"]
        text = (
            last
            if isinstance(last, str)
            else " ".join(p.get("text", "") for p in last if p.get("type") == "text")
        )
        self.attempts[text] += 1
        n = self.attempts[text]
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.status is not None:
                return web.json_response(
                    {"error": {"message": f"broken server ({self.status})"}}, status=self.status
                )
            if self.capacity is None:
                await asyncio.sleep(self.delay_s)
            else:
                self._slots = self._slots or asyncio.Semaphore(self.capacity)
                async with self._slots:
                    await asyncio.sleep(self.delay_s)
            m = _MARK.search(text)
            if "[[always500]]" in text or (m and m.group(1) == "500" and n <= int(m.group(2))):
                return web.json_response({"error": {"message": "boom"}}, status=500)
            if "[[grammar500]]" in text:  # vLLM 0.32's body when xgrammar refuses a schema
                return web.json_response(
                    {
                        "error": {
                            "message": "Failed to compile grammar for request: xgrammar cannot compile the JSON schema "
                            "(pattern repeat count 160 exceeds the limit)",
                            "type": "InternalServerError",
                            "param": None,
                            "code": 500,
                        }
                    },
                    status=500,
                )
            if m and m.group(1) == "429" and n <= int(m.group(2)):
                return web.json_response({"error": {"message": "slow down"}}, status=429)
            if m and m.group(1) == "timeout" and n <= int(m.group(2)):
                await asyncio.sleep(self.stall_s)
            if "[[echo401]]" in text:
                return web.json_response(
                    {"error": {"message": f"bad key {request.headers.get('Authorization')}"}},
                    status=401,
                )
            if "[[echokey]]" in text:
                text = f"{text} {request.headers.get('Authorization')}"
            if "[[html]]" in text:
                return web.Response(
                    text="<html><body>Welcome to nginx!</body></html>", content_type="text/html"
                )
            if "[[nochoices]]" in text:
                return web.json_response(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [],
                    }
                )
            fmt = body.get("response_format")
            reply = _REPLY.search(text)
            if reply:
                content = reply.group(1)
            elif "[[malformed]]" in text:
                content = '{"answer": "yes", '
            elif fmt and fmt.get("type") == "json_schema":
                props = fmt["json_schema"]["schema"].get("properties", {})
                content = json.dumps({k: (v.get("enum") or ["x"])[0] for k, v in props.items()})
            else:
                content = f"echo: {text}"
            n_images = sum(
                1
                for msg in body["messages"]
                if not isinstance(msg["content"], str)
                for p in msg["content"]
                if p.get("type") == "image_url"
            )
            return web.json_response(
                {
                    "id": f"cmpl-{n}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "length" if "[[length]]" in text else "stop",
                            "message": {"role": "assistant", "content": content},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": 10 + 100 * n_images,
                        "completion_tokens": 5,
                        "total_tokens": 15 + 100 * n_images,
                    },
                }
            )
        finally:
            self.in_flight -= 1

    async def _models(self, request: web.Request) -> web.Response:
        if self.models is None:
            return web.json_response({"error": {"message": "not found"}}, status=404)
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"object": "model", "created": 0, "owned_by": "vllm", **m} for m in self.models
                ],
            }
        )

    async def _image(self, request: web.Request) -> web.Response:
        """``POST /v1/images/generations``: a PNG whose grey level encodes the prompt's length."""
        import base64
        import io

        from PIL import Image

        body = await request.json()
        self.bodies.append(body)
        self.auth_headers.add(request.headers.get("Authorization", ""))
        buf = io.BytesIO()
        Image.new("RGB", (64, 64), (len(body["prompt"]) % 256,) * 3).save(buf, format="PNG")
        return web.json_response(
            {"created": 0, "data": [{"b64_json": base64.b64encode(buf.getvalue()).decode()}]}
        )

    def __enter__(self) -> OpenAIStub:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            app = web.Application(client_max_size=64 * 2**20)
            app.router.add_post("/v1/chat/completions", self._chat)
            app.router.add_post("/v1/images/generations", self._image)
            app.router.add_get("/v1/models", self._models)
            self._runner = web.AppRunner(app)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            self._loop.run_until_complete(site.start())
            port = site._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}/v1"
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
