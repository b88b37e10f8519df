"""The OpenAI wire format the ``openai`` backend speaks: chat messages with images as base64 data
URLs, a request's keyword arguments (:func:`chat_request`), constraints as ``response_format``
json_schema (choices as a one-field object with an enum; schemas made portable across vLLM's
grammar engines, and :func:`schema_problems` for those that are not), reading a completion and its
constrained reply (:func:`read_reply`), and telling a server's grammar failure from a retryable error."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

from lib.core.answers import (
    choice_schema,
    parse_choice,
    parse_json_reply,
    without_beside_pattern,
)
from lib.core.schema import FREE, INVALID, JSON_SCHEMA, Request
from lib.io import load_image

# A choice travels as {"answer": "<choice>"}: the wrapper's tokens come on top of the answer's budget
# (without them a 2-token budget ends inside the braces and every answer is a truncated invalid).
CHOICE_WRAPPER_TOKENS = 16

# xgrammar (vLLM's default structured-output engine) refuses a regex repeat count above this.
MAX_PATTERN_REPEAT = 128
_REPEAT = re.compile(r"(?<!\\)\{(\d+)(?:,(\d*))?\}")


def data_url(image) -> str:
    """A base64 data URL: file bytes as they are for paths, PNG for in-memory PIL images."""
    if isinstance(image, (str, Path)):
        with_format = load_image(image, mode=None)  # validates, and tells the format
        fmt = (with_format.format or "png").lower()
        raw = Path(image).read_bytes()
    else:
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        fmt, raw = "png", buf.getvalue()
    return f"data:image/{fmt};base64,{base64.b64encode(raw).decode()}"


def to_openai_messages(messages: list[dict]) -> list[dict]:
    out = []
    for m in messages:
        content = m["content"]
        if not isinstance(content, str):
            content = [
                {"type": "image_url", "image_url": {"url": data_url(p["image"])}}
                if p.get("type") == "image"
                else p
                for p in content
            ]
        out.append({"role": m["role"], "content": content})
    return out


def last_text(r: Request) -> str:
    content = r.messages[-1]["content"]
    return (
        content
        if isinstance(content, str)
        else " ".join(p["text"] for p in content if p.get("type") == "text")
    )


def response_format(request: Request) -> dict | None:
    """``response_format`` for a constraint: choices become a one-field JSON object with an enum, a
    JSON schema goes as :func:`portable_schema` makes it."""
    c = request.constraint
    if c is None:
        return None
    if c.choices is not None:
        return {
            "type": "json_schema",
            "json_schema": {"name": "choice", "schema": choice_schema(c.choices), "strict": True},
        }
    return {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": portable_schema(c.json_schema), "strict": True},
    }


def portable_schema(schema):
    """``schema`` as servers get it: a string's ``minLength``/``maxLength`` beside a ``pattern``
    left out (xgrammar, vLLM's default engine, refuses the pair with a 400). The reply is checked
    against the whole schema here, so an over-long string is still invalid, never accepted."""
    return without_beside_pattern(schema, ("minLength", "maxLength"))


def chat_request(model: str, r: Request) -> dict:
    """The keyword arguments of ``chat.completions.create`` for request ``r`` to ``model``: its
    messages (images as data URLs), settings, and a constraint's ``response_format`` (a choice's
    token budget grows by the JSON wrapper's tokens)."""
    kwargs = {
        "model": model,
        "messages": to_openai_messages(r.messages),
        "max_tokens": r.max_new_tokens
        + (
            CHOICE_WRAPPER_TOKENS
            if r.constraint is not None and r.constraint.choices is not None
            else 0
        ),
        "temperature": r.temperature,
        "top_p": r.top_p,
        "seed": r.seed,
    }
    fmt = response_format(r)
    if fmt:
        kwargs["response_format"] = fmt
    return kwargs


def completion_parts(completion) -> tuple:
    """``(content, finish_reason, prompt_tokens, completion_tokens)`` of a chat completion; a 200
    that is no chat completion (an HTML page, ``choices: []``) raises (AttributeError, IndexError...)."""
    choice = completion.choices[0]
    content = choice.message.content
    finish = getattr(choice, "finish_reason", None)
    usage = getattr(completion, "usage", None)
    pt, ct = (int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)) if usage else (0, 0)
    return content, finish, pt, ct


def read_reply(text: str, r: Request, fmt: dict | None) -> tuple:
    """``(parsed, method, valid, problem)``: the JSON the response_format asked for, checked
    against its (closed) schema, else (servers that ignore response_format) the bare text by
    :func:`parse_choice`; unreadable = invalid, kept raw, with why when the JSON could not be read."""
    c = r.constraint
    if c is None:
        return text, FREE, True, None
    value, method, problem = parse_json_reply(
        text, fmt["json_schema"]["schema"] if c.choices is not None else c.json_schema
    )
    if method != INVALID:
        return (value["answer"] if c.choices is not None else value), JSON_SCHEMA, True, None
    if c.choices is not None:
        value, method = parse_choice(text, c.choices)
        if method != INVALID:
            return value, method, True, None
    return None, INVALID, False, problem


def schema_problems(schema: dict, where: str = "$") -> list[str]:
    """Why ``schema`` may not compile, or may mean something else, on vLLM's engines (empty: fine).

    Checked: every object closes its properties (``additionalProperties: false``: xgrammar and
    guidance differ on the default), every ``pattern`` is anchored (``^...$``: the engines differ on
    unanchored ones), repeats at most :data:`MAX_PATTERN_REPEAT` times and has no length bounds
    beside it (xgrammar refuses both: vLLM answers 500 or 400). A hand-written walk: no validator
    checks portability."""
    problems = []
    if not isinstance(schema, dict):
        return problems
    if (schema.get("type") == "object" or "properties" in schema) and schema.get(
        "additionalProperties"
    ) is not False:
        problems.append(f"{where}: object without additionalProperties: false")
    pattern = schema.get("pattern")
    if pattern is not None:
        if not (pattern.startswith("^") and pattern.endswith("$")):
            problems.append(f"{where}.pattern: not anchored with ^...$: {pattern!r}")
        counts = [int(x) for m in _REPEAT.finditer(pattern) for x in m.groups() if x]
        if counts and max(counts) > MAX_PATTERN_REPEAT:
            problems.append(
                f"{where}.pattern: repeat count {max(counts)} > {MAX_PATTERN_REPEAT} "
                f"(xgrammar refuses it): {pattern!r}"
            )
        if "minLength" in schema or "maxLength" in schema:
            problems.append(
                f"{where}: pattern with minLength/maxLength (xgrammar refuses the pair)"
            )
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        for name, sub in (schema.get(key) or {}).items():
            problems += schema_problems(sub, f"{where}.{key}.{name}")
    for key in ("items", "additionalProperties", "not", "contains"):
        if isinstance(schema.get(key), dict):
            problems += schema_problems(schema[key], f"{where}.{key}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(schema.get(key) or []):
            problems += schema_problems(sub, f"{where}.{key}[{i}]")
    return problems


# What vLLM's HTTP 500 answers say when a grammar engine cannot compile the request's schema.
_GRAMMAR_FAILURE = re.compile(
    r"grammar|xgrammar|guidance|llguidance|structured.output|json.schema", re.I
)


def grammar_failure(response) -> bool:
    """Is this HTTP response a server error about the request's grammar (never worth a retry)?"""
    if response.status_code < 500:
        return False
    try:
        body = response.text
    except Exception:  # a streamed body not read yet: cannot tell
        return False
    return bool(_GRAMMAR_FAILURE.search(body))
