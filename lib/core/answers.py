"""Reading answers from raw model text: one of a closed set of choices, or JSON under a schema.

Nothing is ever guessed: text that cannot be read gives ``(None, INVALID)``, and the caller keeps
the raw text and counts the answer as invalid. Reading never raises on what a model sent (JSON
nested past the parser's depth, a reply that is not text): such a reply is an unreadable answer of
its item, never an error of the batch. Backends keep at most :data:`MAX_REPLY_CHARS` of a reply
(:func:`cap_reply`) and keep a reply that is not text as JSON, with the reason (:func:`not_text`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from lib.core.schema import (
    FREE,
    INVALID,
    PARSE_CONTAINS,
    PARSE_EXACT,
    PARSE_JSON,
    PARSE_LETTER,
    Constraint,
)

# The most of one reply a backend keeps. The longest reply any stage asks for is a few hundred
# tokens (chain-of-thought reasoning, a judge's rationale; a token is a few characters), so a reply
# past this is a runaway or hostile server; kept whole it would be copied into the call cache and
# predictions.jsonl and re-parsed on every rescore.
MAX_REPLY_CHARS = 64 * 1024

_LETTER = re.compile(
    r"^\s*(?:\(?answer\)?\s*(?:is)?\s*[:\-]?\s*)?\(?([A-Z])\)?(?:[.:)\s]|$)", re.IGNORECASE
)


def parse_choice(text: str, choices: tuple[str, ...] | list[str]) -> tuple[str | None, str]:
    """Read one of ``choices`` from free text, or return ``(None, "invalid")``.

    Tried in order: the whole answer equals a choice (case and surrounding punctuation ignored); a
    leading option letter when the choices are letters; exactly one choice occurs as a whole word.
    Two different choices found means the answer is ambiguous and so invalid - never a guess.
    A reply holding a JSON object (as :func:`parse_json` finds it) is the closed choice wrapper
    ``{"answer": <choice>}`` that structured output asks for, or no answer: an extra key or another
    answer does not leave a choice to be read from the rest of the text. A reply that is a JSON
    array is neither a bare choice nor the wrapper, so no answer either.
    """
    if not isinstance(text, str):
        return None, INVALID
    if _off_choice_wrapper(text, choices):
        return None, INVALID
    norm = lambda s: s.strip().strip(".!\"'`* ").lower()
    answer = norm(text)
    for c in choices:
        if answer == norm(c):
            return c, PARSE_EXACT
    upper = {c.upper(): c for c in choices}
    if all(len(c) == 1 for c in choices):
        m = _LETTER.match(text)
        # a lower-case letter counts only in parentheses: "a cat" starts with an article, not option A
        if (
            m
            and m.group(1).upper() in upper
            and (m.group(1).isupper() or "(" in m.group(0) or ")" in m.group(0))
        ):
            letter = m.group(1).upper()
            rest = text[m.end() :]
            others = {
                c
                for c in choices
                if c != letter and re.search(rf"(?<!\w){re.escape(c)}(?!\w)", rest)
            }
            return (
                (upper[letter], PARSE_LETTER) if not others else (None, INVALID)
            )  # "Y N": two answers
    # one-character choices (option letters) only count as capitals standing alone: "a cat" names no option
    found = {
        c
        for c in choices
        if (
            re.search(rf"(?<!\w){re.escape(c)}(?!\w)", text)
            if len(c) == 1
            else re.search(rf"(?<!\w){re.escape(norm(c))}(?!\w)", answer)
        )
    }
    if len(found) == 1:
        return found.pop(), PARSE_CONTAINS
    return None, INVALID


def choice_schema(choices) -> dict:
    """The closed JSON schema of a choice answer, ``{"answer": <one of choices>}`` and nothing else
    (what structured output is asked for)."""
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": list(choices)}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def _json_value(text: str) -> tuple[bool, Any, str | None]:
    """``(found, value, problem)``: the reply's JSON value - the whole text, else its first
    ``{...}`` block - or why none could be read from JSON that is there (nested too deep)."""
    candidates = [text]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    problem = None
    for cand in candidates:
        try:
            return True, json.loads(cand), None
        except (
            RecursionError
        ):  # the parser's stack, not the reply's fault alone: unreadable, never fatal
            problem = "JSON nested too deep to read"
        except ValueError:  # JSONDecodeError, and numbers past int()'s digit limit
            continue
    return False, None, problem


def _off_choice_wrapper(text: str, choices) -> bool:
    """Does the reply hold JSON - an object, an array - other than exactly ``{"answer": <a choice>}``?"""
    if "{" not in text and "[" not in text:
        return False
    found, value, problem = _json_value(text)
    if problem is not None:  # JSON too deep to read is no wrapper either
        return True
    if not found:
        return False
    if isinstance(value, list):
        return True
    return isinstance(value, dict) and not (
        value.keys() == {"answer"} and value["answer"] in choices
    )


def without_beside_pattern(schema, keys: tuple[str, ...]):
    """``schema`` with ``keys`` left out of every object that has a string ``pattern`` (nested
    schemas included): what a constrained decoder that cannot take a pattern with them gets
    (:func:`lib.models.openai_format.portable_schema`, :func:`lib.models.hf_json.decoding_schema`).
    """
    if isinstance(schema, list):
        return [without_beside_pattern(x, keys) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: without_beside_pattern(v, keys) for k, v in schema.items()}
    if isinstance(out.get("pattern"), str):
        for key in keys:
            out.pop(key, None)
    return out


def parse_json_reply(text: str, schema: dict | None = None) -> tuple[Any, str, str | None]:
    """``(value, method, problem)``: :func:`parse_json`, and why a reply holding JSON was not read
    (nested too deep, does not fit ``schema``); ``problem`` is None when it was read or when the
    text holds no JSON at all. A closed schema (``additionalProperties: false``) is held closed."""
    import jsonschema

    if not isinstance(text, str):
        return None, INVALID, f"the reply is a {type(text).__name__}, not text"
    found, value, problem = _json_value(text)
    if not found:
        return None, INVALID, problem
    if schema is not None:
        try:
            jsonschema.validate(value, schema)
        except jsonschema.ValidationError as e:
            return None, INVALID, f"does not fit the schema: {_short(e.message)}"
        except RecursionError:
            return None, INVALID, "JSON nested too deep to check against the schema"
    return value, PARSE_JSON, None


def parse_json(text: str, schema: dict | None = None) -> tuple[Any, str]:
    """Read a JSON value (the first ``{...}`` block if the text has more) and check it against
    ``schema``; return ``(None, "invalid")`` when that fails."""
    value, method, _ = parse_json_reply(text, schema)
    return value, method


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def cap_reply(text: str, limit: int = MAX_REPLY_CHARS) -> tuple[str, str | None]:
    """``(kept, problem)``: ``text`` cut to its first ``limit`` characters, and why when it was cut."""
    if len(text) <= limit:
        return text, None
    return text[
        :limit
    ], f"reply of {len(text):,} characters cut to its first {limit:,} (MAX_REPLY_CHARS)"


def not_text(content) -> tuple[str, str]:
    """``(as_json, reason)`` for a reply whose content is not text (a list, a number, an object):
    what to keep of it (cap it with :func:`cap_reply`) and why it is no answer."""
    try:
        as_json = json.dumps(content, ensure_ascii=False, default=str)
    except (RecursionError, ValueError, TypeError):
        as_json = f"<{type(content).__name__} that cannot be written as JSON>"
    return as_json, f"the reply's content is a {type(content).__name__}, not text (kept as JSON)"


def parse_response(text: str, constraint: Constraint | None) -> tuple[Any, str, bool]:
    """Parse raw text under a constraint: ``(parsed, method, valid)``."""
    if not isinstance(text, str):
        return None, INVALID, False  # a reply that is not text names no answer, not even a free one
    if constraint is None:
        return text, FREE, True
    if constraint.choices is not None:
        value, method = parse_choice(text, constraint.choices)
    else:
        value, method = parse_json(text, constraint.json_schema)
    return value, method, method != INVALID
