"""A shortcut audit for any multiple-choice dataset: how often a text-only *tell* - a surface
property only one option has - picks a correct option, per question type, and a blind baseline that
answers from the tells alone, beside chance.

    audit(items)            # items: mcq Items (options, answer indices, meta.specific_type)

Tells (each fires on a question when exactly one option has the property):
``shortest`` / ``longest`` (characters), ``capitalisation`` (the only option whose first letter's case
differs), ``final_stop`` (the only option that ends - or does not end - with a full stop), and
``placeholder`` (the only option holding "foo", "lorem ipsum"...: a tell that points *away* from
the answer, so its rate is how often that option is correct).

Rows: type, tell, fired (questions it fires on), correct (of those, how often its option is a
correct one), rate, chance (the mean share of correct options on those questions). The blind rows
(tell ``blind baseline``) answer each single-answer question with the first of :data:`BLIND_ORDER`
that fires (the tells that point at the answer in the release, most precise first), else option A; ``rate`` is their exact-match accuracy over every
question of the type, ``chance`` the mean of 1 / #options.
"""

from __future__ import annotations

import re

import pandas as pd

TELLS = ("shortest", "longest", "capitalisation", "final_stop", "placeholder")
BLIND_ORDER = (
    "final_stop",
    "capitalisation",
    "shortest",
)  # the blind baseline's tells, most precise first
_PLACEHOLDER = re.compile(r"\b(?:foo|baz|qux|lorem|ipsum|placeholder)\b", re.IGNORECASE)


def _unique(flags: list[bool]) -> int | None:
    return flags.index(True) if flags.count(True) == 1 else None


def fires(tell: str, options: list[str]) -> int | None:
    """The index of the one option the tell singles out, or None."""
    lengths = [len(o) for o in options]
    if tell == "shortest":
        return _unique([n == min(lengths) for n in lengths])
    if tell == "longest":
        return _unique([n == max(lengths) for n in lengths])
    if tell == "capitalisation":
        upper = [o[:1].isupper() for o in options]
        return _unique(upper) if upper.count(True) == 1 else _unique([not u for u in upper])
    if tell == "final_stop":
        stop = [o.rstrip().endswith(".") for o in options]
        return _unique(stop) if stop.count(True) == 1 else _unique([not s for s in stop])
    if tell == "placeholder":
        return _unique([bool(_PLACEHOLDER.search(o)) for o in options])
    raise ValueError(f"unknown tell {tell!r}; known: {TELLS}")


def audit(items) -> pd.DataFrame:
    """Per question type and tell: fired, correct, rate and chance; plus the blind baseline's rows."""
    rows = []
    by_type: dict = {}
    for it in items:
        by_type.setdefault(it.meta.get("specific_type") or it.meta.get("type") or "all", []).append(
            it
        )
    for qtype, group in sorted(by_type.items()):
        for tell in TELLS:
            hits = [(it, fires(tell, list(it.options))) for it in group]
            hits = [(it, k) for it, k in hits if k is not None]
            right = sum(k in it.answer for it, k in hits)
            chance = (
                sum(len(it.answer) / len(it.options) for it, _ in hits) / len(hits)
                if hits
                else float("nan")
            )
            rows.append(
                {
                    "type": qtype,
                    "tell": tell,
                    "fired": len(hits),
                    "correct": right,
                    "rate": right / len(hits) if hits else float("nan"),
                    "chance": chance,
                }
            )
        single = [it for it in group if it.meta.get("general_type", "single") == "single"]
        if single:
            picks = [
                next((k for t in BLIND_ORDER if (k := fires(t, list(it.options))) is not None), 0)
                for it in single
            ]
            right = sum(k in it.answer for it, k in zip(single, picks))
            rows.append(
                {
                    "type": qtype,
                    "tell": "blind baseline",
                    "fired": len(single),
                    "correct": right,
                    "rate": right / len(single),
                    "chance": sum(1 / len(it.options) for it in single) / len(single),
                }
            )
    return pd.DataFrame(rows, columns=["type", "tell", "fired", "correct", "rate", "chance"])


def macro_blind(table: pd.DataFrame) -> dict:
    """The blind baseline's macro average over types, beside chance's."""
    b = table[table["tell"] == "blind baseline"]
    return {
        "blind_macro": float(b["rate"].mean()) if len(b) else float("nan"),
        "chance_macro": float(b["chance"].mean()) if len(b) else float("nan"),
    }
