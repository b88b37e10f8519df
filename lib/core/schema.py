"""Record types shared by every layer: Item (a question), Prediction (a model's answer), Judgement,
and the model-call records Request, Constraint and Response (with the method names a Response
records). They sit below the call store and the backends, so both import them and neither
imports the other.

Plain dataclasses with ``to_dict`` / ``from_dict`` so they round-trip through JSONL and HF
``datasets`` unchanged. ``from_dict`` rejects unknown keys and wrong types with a message naming
the field, so a bad record is caught where it is read, not three stages later.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from PIL import Image


@cache
def _field_names(cls) -> tuple[str, ...]:
    """A record type's field names, in order, looked up once per type (``dataclasses.fields``
    rebuilds them on every call, once per record of a rescore)."""
    return tuple(f.name for f in fields(cls))


@cache
def _field_set(cls) -> frozenset[str]:
    return frozenset(_field_names(cls))


def _check(cls, d: dict) -> dict:
    if not isinstance(d, dict):
        raise TypeError(f"{cls.__name__} record must be an object, got {type(d).__name__}")
    names = _field_set(cls)
    if not d.keys() <= names:
        unknown = sorted(set(d) - names)
        raise ValueError(f"{cls.__name__} has no field(s) {unknown}; known fields: {sorted(names)}")
    return d


def _record(cls, d: dict):
    """``cls(**d)``, checked (:func:`_check`)."""
    return cls(**_check(cls, d))


@dataclass(slots=True)
class Item:
    """One benchmark question.

    ``answer`` is always a list: option indices for multiple choice (one index for single-answer
    items, any number for multi-answer ones, where ``[]`` means none of the options; ``meta``'s
    ``general_type`` says which), reference texts otherwise. One list type per file keeps
    ``items.jsonl`` a single Arrow schema, so HF ``datasets`` loads it as it is.
    ``meta`` holds question type, group, form, level, style, source, parent image, seed...
    """

    # the fields whose short strings items repeat: readers that keep items share them (lib.io.share_strings)
    REPEATED: ClassVar[tuple[str, ...]] = ("task", "images", "options", "answer", "meta")

    id: str
    task: str
    question: str
    images: list[str] = field(default_factory=list)  # relative to the dataset folder
    options: list[str] | None = None
    answer: list = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Item.id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.task, str) or not isinstance(self.question, str):
            raise TypeError(
                f"Item {self.id!r}: task and question must be strings, got "
                f"{type(self.task).__name__} and {type(self.question).__name__}"
            )
        if not isinstance(
            self.meta, dict
        ):  # tasks read meta by key: a list or a string would fail mid-evaluation
            raise TypeError(
                f"Item {self.id!r}: meta must be an object, got {type(self.meta).__name__}"
            )
        if not isinstance(self.images, list) or not all(isinstance(p, str) for p in self.images):
            raise TypeError(
                f"Item {self.id!r}: images must be a list of paths, got {self.images!r:.200}"
            )
        if not isinstance(self.answer, list):
            raise TypeError(
                f"Item {self.id!r}: answer must be a list (indices or reference texts), got {self.answer!r}"
            )
        if self.options is not None:
            n = len(self.options)
            if n < 2 or not all(isinstance(o, str) for o in self.options):
                raise ValueError(
                    f"Item {self.id!r}: a multiple-choice item needs at least 2 options (strings), "
                    f"got {self.options!r}"
                )
            if any(
                isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n for i in self.answer
            ):
                raise ValueError(
                    f"Item {self.id!r}: answer {self.answer!r} must be indices into {n} options"
                )
        elif any(not isinstance(a, str) for a in self.answer):
            raise ValueError(
                f"Item {self.id!r}: without options the answer is a list of reference texts"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Item:
        """An item from its record, checked."""
        return _record(cls, d)


@dataclass(slots=True)
class Prediction:
    """A model's answer to one Item: raw output kept, parsed value, how it was read, cost."""

    # the fields whose short strings predictions repeat (lib.io.share_strings)
    REPEATED: ClassVar[tuple[str, ...]] = (
        "model",
        "task",
        "raw",
        "dataset",
        "parsed",
        "style",
        "method",
        "scores",
        "meta",
    )

    item_id: str
    model: str
    task: str
    raw: str
    dataset: str = ""  # the dataset's name in the evaluation (datasets may share item ids)
    parsed: Any = None
    style: str = "zero_shot"  # prompt style (lib.tasks.styles): zero_shot or cot (zero-shot chain of thought)
    method: str = "free"
    valid: bool = True
    correct: bool | None = None  # None until scored, and for invalid answers of unscored tasks
    truncated: bool = (
        False  # the answer was cut off by the token limit (counted beside every metric)
    )
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    call_key: str | None = None  # the call-store key, so the raw output can be re-parsed later
    scores: dict = field(
        default_factory=dict
    )  # per-item metric values (exact, jaccard, bleu, anls...)
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The record as written to ``predictions.jsonl``: a shallow copy (``asdict`` copies every
        nested dict and list, on each prediction a rescore writes), so its ``scores`` and ``meta``
        are the prediction's own."""
        return {name: getattr(self, name) for name in _field_names(type(self))}

    @classmethod
    def from_dict(cls, d: dict) -> Prediction:
        """The record of a ``predictions.jsonl`` line; one written before ``dataset`` was a field
        (it sat in ``meta``) is read with it moved there."""
        if "dataset" not in d and isinstance(d.get("meta"), dict) and "dataset" in d["meta"]:
            d = {
                **d,
                "meta": {k: v for k, v in d["meta"].items() if k != "dataset"},
                "dataset": d["meta"]["dataset"],
            }
        return _record(cls, d)


@dataclass(slots=True)
class Judgement:
    """A judge's rating of one Prediction (LAVE: rating 1-3, score (r-1)/2, with a rationale)."""

    # the fields whose short strings judgements repeat (lib.io.share_strings)
    REPEATED: ClassVar[tuple[str, ...]] = ("model", "judge", "meta")

    item_id: str
    model: str
    judge: str
    rating: int | None  # None = unscored: the judge's output could not be read
    score: float | None
    rationale: str = ""
    raw: str = ""
    valid: bool = True
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Judgement:
        return _record(cls, d)


# --- model calls -----------------------------------------------------------------------------

# Methods recorded in Response.method
CONSTRAINED_TRIE = "constrained:trie"  # decoding restricted to the choices by a token trie
CONSTRAINED_LOGLIK = "constrained:loglik"  # the choice with the highest log-likelihood
CONSTRAINED_RANDOM = "constrained:random"  # a uniform pick from the choices (the random baseline)
JSON_SCHEMA = (
    "json_schema"  # structured output enforced by the backend (outlines / response_format)
)
PARSE_EXACT = "parse:exact"
PARSE_LETTER = "parse:letter"
PARSE_CONTAINS = "parse:contains"
PARSE_JSON = "parse:json"
FREE = "free"  # no constraint: the text is the answer
INVALID = "invalid"  # the model answered but the answer could not be read
ERROR = "error"  # no answer at all (e.g. the API failed after its retries)


def is_constrained(method: str) -> bool:
    """Was a response produced under a constraint (trie, log-likelihood, JSON schema)? Such answers
    are taken as decoded; everything else is (re-)parsed from the raw text."""
    return method.startswith("constrained") or method == JSON_SCHEMA


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
        return {
            "choices": list(self.choices) if self.choices else None,
            "json_schema": self.json_schema,
            "method": self.method,
        }


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
    def simple(
        cls, text: str, images: list | tuple = (), system: str | None = None, **kw
    ) -> Request:
        """A one-turn user message: the images first, then the text."""
        content = [{"type": "image", "image": im} for im in images] + [
            {"type": "text", "text": text}
        ]
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": content}
        ]
        return cls(messages=messages, **kw)

    def images(self) -> list:
        """The images of all messages, in order."""
        return [
            part["image"]
            for m in self.messages
            if not isinstance(m["content"], str)
            for part in m["content"]
            if part.get("type") == "image"
        ]

    def settings(self) -> dict:
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }

    def key_payload(self) -> dict:
        """Everything that determines the answer, with images replaced by their content hash."""
        messages = []
        for m in self.messages:
            content = m["content"]
            if not isinstance(content, str):
                content = [
                    {"type": "image", "sha256": image_sha256(p["image"])}
                    if p.get("type") == "image"
                    else p
                    for p in content
                ]
            messages.append({"role": m["role"], "content": content})
        return {
            "messages": messages,
            "settings": self.settings(),
            "constraint": self.constraint.to_dict() if self.constraint else None,
        }


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
    finish_reason: str | None = None  # "stop", or "length" when the token limit cut the answer off
    # why the reply was not taken as it came (cut at the reply cap, JSON too deep or off its schema)
    problem: str | None = None
    cached: bool = field(default=False, compare=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("cached")
        if (
            d["problem"] is None
        ):  # the record of a reply taken as it came is what it was before the field
            d.pop("problem")
        return d

    @classmethod
    def from_dict(cls, d: dict, cached: bool = False) -> Response:
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


# --- annotations -----------------------------------------------------------------------------

DIFFICULTY = ("EASY", "MEDIUM", "HARD")
SENTIMENTS = ("positive", "neutral", "negative")


@dataclass(frozen=True)
class AnnotationField:
    name: str
    kind: str  # text | bool | choice | list | targets
    choices: tuple = ()
    help: str = ""


# The annotation schema of stage 02: YesBut's fields and MemeQA's needs; every field is optional.
FIELDS = (
    AnnotationField("left_description", "text", help="what the left ('yes') half shows"),
    AnnotationField("right_description", "text", help="what the right ('but') half shows"),
    AnnotationField("overall_description", "text", help="the whole image, with its punchline"),
    AnnotationField("text_in_left", "bool", help="is there text in the left half?"),
    AnnotationField("text_in_right", "bool", help="is there text in the right half?"),
    AnnotationField("connected", "bool", help="are the two halves connected?"),
    AnnotationField(
        "difficulty", "choice", DIFFICULTY, help="how hard is the image to understand?"
    ),
    AnnotationField("satirical", "bool", help="is the image satirical?"),
    AnnotationField("intents", "list", help="MemeQA: what the meme intends (one per line)"),
    AnnotationField("derivations", "list", help="MemeQA: what can be derived from it"),
    AnnotationField("background_knowledge", "list", help="MemeQA: facts needed to understand it"),
    AnnotationField("visual_cues", "list", help="MemeQA: visual statements"),
    AnnotationField(
        "targets", "targets", help='MemeQA: [{"target", "sentiment", "action"}] (JSON)'
    ),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}
CATEGORICAL = tuple(f.name for f in FIELDS if f.kind in ("bool", "choice"))


def check_annotation(field: str, value):
    """The value if it fits the field, else a ValueError naming the field and what it expects."""
    if field not in FIELD_BY_NAME:
        raise ValueError(f"unknown annotation field {field!r}; known: {sorted(FIELD_BY_NAME)}")
    f = FIELD_BY_NAME[field]
    ok = {
        "text": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, bool),
        "choice": lambda v: v in f.choices,
        "list": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "targets": lambda v: (
            isinstance(v, list) and all(isinstance(t, dict) and "target" in t for t in v)
        ),
    }[f.kind]
    if value is not None and not ok(value):
        expected = {
            "choice": f"one of {f.choices}",
            "targets": 'a list of {"target", "sentiment", "action"}',
        }.get(f.kind, f.kind)
        raise ValueError(f"annotation field {field!r} expects {expected}, got {value!r}")
    return value
