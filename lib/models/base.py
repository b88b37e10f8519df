"""The one request/response interface every backend speaks, and the parsers that read raw text.

A *request* is a chat (OpenAI-style messages whose content mixes ``{"type": "text", "text": ...}``
and ``{"type": "image", "image": <path or PIL image>}`` parts), generation settings and an optional
*constraint*: allowed choices or a JSON schema. A *response* keeps the raw text, the parsed value,
how it was obtained (``method``), token counts, latency and cost. Nothing is ever guessed: text that
cannot be parsed stays in ``text`` with ``parsed=None`` and ``valid=False``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

# Methods recorded in Response.method
CONSTRAINED_TRIE = "constrained:trie"  # decoding restricted to the choices by a token trie
CONSTRAINED_LOGLIK = "constrained:loglik"  # the choice with the highest log-likelihood
JSON_SCHEMA = "json_schema"  # structured output enforced by the backend (outlines / response_format)
PARSE_EXACT = "parse:exact"
PARSE_LETTER = "parse:letter"
PARSE_CONTAINS = "parse:contains"
PARSE_JSON = "parse:json"
FREE = "free"  # no constraint: the text is the answer
INVALID = "invalid"  # the model answered but the answer could not be read
ERROR = "error"  # no answer at all (e.g. the API failed after its retries)


@dataclass(frozen=True)
class Constraint:
    """Restrict an answer to one of ``choices`` or to JSON matching ``json_schema``.

    ``method`` picks how a local model honours choices: ``trie`` (constrained greedy decoding) or
    ``loglik`` (score every option, take the most likely; gives a ranking even for untrained models).
    """

    choices: tuple[str, ...] | None = None
    json_schema: dict | None = None
    method: str = "trie"

    def __post_init__(self):
        if (self.choices is None) == (self.json_schema is None):
            raise ValueError("a Constraint takes exactly one of choices= or json_schema=")
        if self.choices is not None:
            object.__setattr__(self, "choices", tuple(self.choices))
            if not self.choices or any(not isinstance(c, str) or not c for c in self.choices):
                raise ValueError(f"choices must be non-empty strings, got {self.choices!r}")
            if len(set(self.choices)) != len(self.choices):
                raise ValueError(f"choices must be distinct, got {self.choices!r}")
        if self.method not in ("trie", "loglik"):
            raise ValueError(f"Constraint.method must be 'trie' or 'loglik', got {self.method!r}")

    def to_dict(self) -> dict:
        return {"choices": list(self.choices) if self.choices else None, "json_schema": self.json_schema, "method": self.method}


@dataclass
class Request:
    """One model call: chat messages, generation settings, optional constraint."""

    messages: list[dict]
    max_new_tokens: int = 32
    temperature: float = 0.0  # 0 = greedy, so cached answers are reproducible
    top_p: float = 1.0
    seed: int = 0
    constraint: Constraint | None = None

    @classmethod
    def simple(cls, text: str, images: list | tuple = (), system: str | None = None, **kw) -> "Request":
        """A one-turn user message: the images first, then the text."""
        content = [{"type": "image", "image": im} for im in images] + [{"type": "text", "text": text}]
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
        return cls(messages=messages, **kw)

    def images(self) -> list:
        """The images of all messages, in order."""
        return [part["image"] for m in self.messages if not isinstance(m["content"], str)
                for part in m["content"] if part.get("type") == "image"]

    def settings(self) -> dict:
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p, "seed": self.seed}

    def key_payload(self) -> dict:
        """Everything that determines the answer, with images replaced by their content hash."""
        messages = []
        for m in self.messages:
            content = m["content"]
            if not isinstance(content, str):
                content = [{"type": "image", "sha256": image_sha256(p["image"])} if p.get("type") == "image" else p
                           for p in content]
            messages.append({"role": m["role"], "content": content})
        return {"messages": messages, "settings": self.settings(),
                "constraint": self.constraint.to_dict() if self.constraint else None}


@dataclass
class Response:
    """What came back: raw text, parsed value, how it was read, tokens, latency, cost."""

    text: str
    parsed: Any = None
    method: str = FREE
    valid: bool = True
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    error: str | None = None
    scores: dict | None = None  # per-choice log-likelihoods when method is loglik
    cached: bool = field(default=False, compare=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("cached")
        return d

    @classmethod
    def from_dict(cls, d: dict, cached: bool = False) -> "Response":
        return cls(**d, cached=cached)


_FILE_HASHES: dict[tuple, str] = {}


def image_sha256(image) -> str:
    """Content hash of an image given as a path (file bytes) or a PIL image (mode, size, pixels).

    File hashes are memoised per (path, size, mtime) for the process: a rerun over a cached
    dataset would otherwise spend most of its time re-reading images it never decodes.
    """
    if isinstance(image, (str, Path)):
        stat = os.stat(image)
        memo = (os.path.abspath(image), stat.st_size, stat.st_mtime_ns)
        if memo not in _FILE_HASHES:
            _FILE_HASHES[memo] = hashlib.sha256(Path(image).read_bytes()).hexdigest()
        return _FILE_HASHES[memo]
    if isinstance(image, Image.Image):
        h = hashlib.sha256(f"{image.mode}:{image.size}".encode())
        h.update(image.tobytes())
        return h.hexdigest()
    raise TypeError(f"an image must be a path or a PIL.Image, got {type(image).__name__}")


def fingerprint(spec: dict) -> str:
    """A stable id for a model spec: the spec's canonical JSON (secrets are never in specs)."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]


# --- parsing raw text -------------------------------------------------------------------------

_LETTER = re.compile(r"^\s*(?:\(?answer\)?\s*(?:is)?\s*[:\-]?\s*)?\(?([A-Z])\)?(?:[.:)\s]|$)", re.IGNORECASE)


def parse_choice(text: str, choices: tuple[str, ...] | list[str]) -> tuple[str | None, str]:
    """Read one of ``choices`` from free text, or return ``(None, "invalid")``.

    Tried in order: the whole answer equals a choice (case and surrounding punctuation ignored); a
    leading option letter when the choices are letters; exactly one choice occurs as a whole word.
    Two different choices found means the answer is ambiguous and so invalid - never a guess.
    """
    norm = lambda s: s.strip().strip(".!\"'`* ").lower()  # noqa: E731
    answer = norm(text)
    for c in choices:
        if answer == norm(c):
            return c, PARSE_EXACT
    upper = {c.upper(): c for c in choices}
    if all(len(c) == 1 for c in choices):
        m = _LETTER.match(text)
        # a lower-case letter counts only in parentheses: "a cat" starts with an article, not option A
        if m and m.group(1).upper() in upper and (m.group(1).isupper() or "(" in m.group(0) or ")" in m.group(0)):
            letter = m.group(1).upper()
            rest = text[m.end():]
            others = {c for c in choices if c != letter and re.search(rf"(?<!\w){re.escape(c)}(?!\w)", rest)}
            return (upper[letter], PARSE_LETTER) if not others else (None, INVALID)  # "Y N": two answers
    # one-character choices (option letters) only count as capitals standing alone: "a cat" names no option
    found = {c for c in choices if (re.search(rf"(?<!\w){re.escape(c)}(?!\w)", text) if len(c) == 1
                                    else re.search(rf"(?<!\w){re.escape(norm(c))}(?!\w)", answer))}
    if len(found) == 1:
        return found.pop(), PARSE_CONTAINS
    return None, INVALID


def parse_json(text: str, schema: dict | None = None) -> tuple[Any, str]:
    """Read a JSON value (the first ``{...}`` block if the text has more) and check it against
    ``schema``; return ``(None, "invalid")`` when that fails."""
    import jsonschema

    candidates = [text]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for cand in candidates:
        try:
            value = json.loads(cand)
        except (json.JSONDecodeError, TypeError):
            continue
        if schema is not None:
            try:
                jsonschema.validate(value, schema)
            except jsonschema.ValidationError:
                return None, INVALID
        return value, PARSE_JSON
    return None, INVALID


def parse_response(text: str, constraint: Constraint | None) -> tuple[Any, str, bool]:
    """Parse raw text under a constraint: ``(parsed, method, valid)``."""
    if constraint is None:
        return text, FREE, True
    if constraint.choices is not None:
        value, method = parse_choice(text, constraint.choices)
    else:
        value, method = parse_json(text, constraint.json_schema)
    return value, method, method != INVALID


class Model:
    """Base class of the backends. Subclasses implement ``_load()`` and ``_generate(requests)``.

    Weights load lazily on the first call, so building a notebook or a test costs nothing until a
    model is used. ``batch_size`` is how many requests a backend wants per call to ``generate``.
    """

    batch_size: int = 8

    def __init__(self, spec: dict):
        self.spec = dict(spec)
        self._loaded = False

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.spec)

    @property
    def name(self) -> str:
        return str(self.spec.get("label") or self.spec.get("name") or self.spec.get("backend"))

    def load(self) -> "Model":
        if not self._loaded:
            self._load()
            self._loaded = True
        return self

    def generate(self, requests: list[Request], on_result=None) -> list[Response]:
        """Answer a batch; ``on_result(i, response)`` is called as each answer completes."""
        self.load()
        return self._generate(list(requests), on_result)

    def _load(self) -> None:
        raise NotImplementedError

    def _generate(self, requests: list[Request], on_result) -> list[Response]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, loaded={self._loaded})"
