"""An OpenAI-compatible server on 127.0.0.1 that answers as a broken or hostile one might (aiohttp).

:class:`HostileStub` is :class:`~tests.support.openai_server.OpenAIStub` (every marker of it still
works) plus two replies that stub cannot send, scripted through the constructor by the text of a
request's last user message:

- ``contents={text: value}``: the reply's ``message.content`` is ``value``, any JSON value - a
  list, a number, an object, or a string of any size;
- ``drip_s={text: seconds}``: the whole reply is sent over ``seconds``, a few bytes every
  ``drip_every_s``, so that no single read waits long enough for a client's read timeout.
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from .openai_server import OpenAIStub


class HostileStub(OpenAIStub):
    def __init__(
        self,
        contents: dict | None = None,
        drip_s: dict[str, float] | None = None,
        drip_every_s: float = 0.1,
        **kw,
    ):
        super().__init__(**kw)
        self.contents, self.drip_s, self.drip_every_s = contents or {}, drip_s or {}, drip_every_s

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()  # aiohttp keeps the body: the stub's own handler reads it again
        last = body["messages"][-1]["content"]
        text = (
            last
            if isinstance(last, str)
            else " ".join(p.get("text", "") for p in last if p.get("type") == "text")
        )
        if text in self.contents:
            self.bodies.append(body)
            self.attempts[text] += 1
            reply = _completion(body["model"], self.contents[text])
        else:
            reply = await super()._chat(request)
        if text not in self.drip_s:
            return reply
        return await self._drip(request, reply.body, self.drip_s[text])

    async def _drip(
        self, request: web.Request, payload: bytes, seconds: float
    ) -> web.StreamResponse:
        """``payload`` as a 200 whose body arrives in pieces over ``seconds``."""
        out = web.StreamResponse(headers={"Content-Type": "application/json"})
        out.content_length = len(payload)
        await out.prepare(request)
        steps = max(1, round(seconds / self.drip_every_s))
        size = -(-len(payload) // steps)
        try:
            for i in range(0, len(payload), size):
                await out.write(payload[i : i + size])
                await asyncio.sleep(self.drip_every_s)
            await out.write_eof()
        except ConnectionError:  # the client gave up: its deadline worked
            pass
        return out


def _completion(model: str, content) -> web.Response:
    return web.Response(
        text=json.dumps(
            {
                "id": "cmpl-hostile",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ),
        content_type="application/json",
    )
