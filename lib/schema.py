"""Record types shared by every stage: Item (a question), Prediction (a model's answer), Judgement.

Plain dataclasses with ``to_dict`` / ``from_dict`` so they round-trip through JSONL and HF
``datasets`` unchanged. ``from_dict`` rejects unknown keys and wrong types with a message naming
the field, so a bad record is caught where it is read, not three stages later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


def _check(cls, d: dict) -> dict:
    if not isinstance(d, dict):
        raise TypeError(f"{cls.__name__} record must be an object, got {type(d).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {unknown}; known fields: {sorted(names)}")
    return d


@dataclass
class Item:
    """One benchmark question.

    ``answer`` is always a list: option indices for multiple choice (one index for single-answer
    items, any number for multi-answer ones, where ``[]`` means none of the options; ``meta``'s
    ``general_type`` says which), reference texts otherwise. One list type per file keeps
    ``items.jsonl`` a single Arrow schema, so HF ``datasets`` loads it as it is.
    ``meta`` holds question type, group, form, level, style, source, parent image, seed...
    """

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
        if not isinstance(self.images, list):
            raise TypeError(f"Item {self.id!r}: images must be a list of paths, got {type(self.images).__name__}")
        if not isinstance(self.answer, list):
            raise TypeError(f"Item {self.id!r}: answer must be a list (indices or reference texts), got {self.answer!r}")
        if self.options is not None:
            n = len(self.options)
            if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n for i in self.answer):
                raise ValueError(f"Item {self.id!r}: answer {self.answer!r} must be indices into {n} options")
        elif any(not isinstance(a, str) for a in self.answer):
            raise ValueError(f"Item {self.id!r}: without options the answer is a list of reference texts")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Item":
        return cls(**_check(cls, d))


@dataclass
class Prediction:
    """A model's answer to one Item: raw output kept, parsed value, how it was read, cost."""

    item_id: str
    model: str
    task: str
    raw: str
    parsed: Any = None
    style: str = "zero_shot"  # prompt style: zero_shot or cot (zero-shot chain of thought)
    method: str = "free"
    valid: bool = True
    correct: bool | None = None  # None until scored, and for invalid answers of unscored tasks
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    call_key: str | None = None  # the call-store key, so the raw output can be re-parsed later
    scores: dict = field(default_factory=dict)  # per-item metric values (exact, jaccard, bleu, anls...)
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Prediction":
        return cls(**_check(cls, d))


@dataclass
class Judgement:
    """A judge's rating of one Prediction (LAVE: rating 1-3, score (r-1)/2, with a rationale)."""

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
    def from_dict(cls, d: dict) -> "Judgement":
        return cls(**_check(cls, d))
