"""The guards of adversarial filtering: the checks every generated distractor passes before the
discriminator sees it (:func:`screen`: no markup, no repeat of a correct, forbidden or kept option,
not much shorter than the correct options, no placeholder, no word repeated next to the blank, no
paraphrase of a correct option) and the length tell (:func:`pick_without_tell`: a single correct
option must not be the uniquely shortest or longest). Each rejection is counted by guard
(:data:`GUARDS`) in the loop's per-iteration statistics (:mod:`lib.af.engine`).
"""

from __future__ import annotations

import itertools
import re

from lib.models.tiny import sentence_encoder

_NOT_TEXT = re.compile(r"[\[\]{}#<>|\\]|\b(?:options|json)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z]{2,}")


_PLACEHOLDER = re.compile(
    r"\b(?:foo|baz|qux|lorem|ipsum|placeholder|option\s*\d+|distractor\s*\d*)\b|\bfoo\s*bar\b",
    re.IGNORECASE,
)
GUARDS = (
    "not_text",
    "duplicate",
    "correct",
    "forbidden",
    "too_short",
    "placeholder",
    "blank_neighbour",
    "paraphrase",
)


def blank_neighbours(blanked: str) -> tuple[str, str]:
    """The words right before and after the blank ("by ____ them" -> ("by", "them"))."""
    before, _, after = blanked.partition("____")
    b, a = before.split(), after.split()
    strip = lambda w: w.strip(".,;:!?\"'").lower()
    return (strip(b[-1]) if b else ""), (strip(a[0]) if a else "")


def conform_style(text: str, correct: list[str]) -> str:
    """A distractor in the correct options' surface style, so style is no tell: their first-letter
    case and their final full stop (when all correct options agree on them)."""
    t = text.strip()
    if correct and t:
        if all(c[:1].isupper() for c in correct):
            t = t[0].upper() + t[1:]
        elif all(c[:1].islower() for c in correct):
            t = t[0].lower() + t[1:]
        if all(c.rstrip().endswith(".") for c in correct) and not t.endswith("."):
            t += "."
        elif not any(c.rstrip().endswith(".") for c in correct):
            t = t.rstrip(".").rstrip()
    return t


def screen(
    candidates: list,
    correct: list[str],
    forbidden: list[str],
    threshold: float,
    min_length_ratio: float = 0.0,
    blanked: str = "",
) -> tuple[list[str], dict]:
    """Keep the acceptable distractors (in the correct options' style: :func:`conform_style`); count
    why the others were rejected, per guard (:data:`GUARDS`). ``min_length_ratio``: a distractor much
    shorter than the correct options (in words) gives the answer away by its length; placeholders
    ("foo", "lorem ipsum", "option 2") are no options; a completion filler that repeats the word
    next to the blank (``blanked``) reads wrongly and gives itself away."""
    why = dict.fromkeys(GUARDS, 0)
    words = lambda t: len(t.split())
    shortest = min_length_ratio * (sum(map(words, correct)) / len(correct)) if correct else 0
    before, after = blank_neighbours(blanked) if blanked else ("", "")
    kept: list[str] = []
    norm = lambda s: " ".join(s.lower().split()).strip(" .")
    correct_n, forbidden_n = {norm(c) for c in correct}, {norm(f) for f in forbidden}
    for c in candidates:
        if not isinstance(c, str) or not c.strip() or _NOT_TEXT.search(c) or not _WORD.search(c):
            why["not_text"] += 1  # empty, markup / JSON debris, or no word at all
        elif norm(c) in correct_n:
            why["correct"] += 1
        elif norm(c) in forbidden_n:
            why["forbidden"] += 1
        elif norm(c) in {norm(k) for k in kept}:
            why["duplicate"] += 1
        elif words(c) < shortest:
            why["too_short"] += 1
        elif _PLACEHOLDER.search(c):
            why["placeholder"] += 1
        elif (before and norm(c).split()[0] == before) or (after and norm(c).split()[-1] == after):
            why["blank_neighbour"] += 1
        else:
            kept.append(conform_style(c, correct))
    if kept and threshold < 1:
        emb = sentence_encoder().encode(
            kept + list(correct), normalize_embeddings=True, show_progress_bar=False
        )
        sims = emb[: len(kept)] @ emb[len(kept) :].T
        para = sims.max(axis=1) >= threshold
        why["paraphrase"] = int(para.sum())
        kept = [k for k, p in zip(kept, para) if not p]
    return kept, why


def length_tell(correct: list[str], distractors: list[str]) -> bool:
    """Does a single correct option stand out as the uniquely shortest or longest (in characters)?
    (intent completion in the release: the uniquely shortest option is right 90% of the time.)"""
    if len(correct) != 1 or not distractors:
        return False
    n, others = len(correct[0]), [len(d) for d in distractors]
    return n < min(others) or n > max(others)


def pick_without_tell(correct: list[str], candidates: list[str], n: int) -> list[str] | None:
    """``n`` of the candidates (in order of preference) with which no length tell remains, or None."""
    for combo in itertools.combinations(candidates, n):
        if not length_tell(correct, list(combo)):
            return list(combo)
    return None
