"""Reading answers from raw model text: one of a closed set of choices, or JSON under a schema.

Nothing is ever guessed: text that cannot be read gives ``(None, INVALID)``, and the caller keeps
the raw text and counts the answer as invalid.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lib.schema import INVALID, FREE, PARSE_CONTAINS, PARSE_EXACT, PARSE_JSON, PARSE_LETTER, Constraint

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
