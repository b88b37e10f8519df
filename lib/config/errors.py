"""The one error of params and how its messages read: the closest known name, values cut short."""

from __future__ import annotations

import difflib


class ParamsError(ValueError):
    """A params file names an unknown parameter or gives a value of the wrong type."""


def did_you_mean(word: str, known) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string."""
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def short(value, limit: int = 120) -> str:
    """``repr`` cut to ``limit`` characters: an error message never echoes a huge value."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
