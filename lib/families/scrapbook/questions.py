"""Scrapbook questions: structured queries, their answers on a scene, and templated paraphrases.

Every question is generated from a *query* (a plain dict) and its answer is computed by
:func:`answer` on the image's scene record, never written by hand:

    {"type": "presence" | "counting" | "confirmation" | "recognition",
     "group": "np" | "abs" | "rel",          # no position / absolute region / relative position
     "target": {"shape": ..., "color": ...},  # the object described (the subject of confirmation
                                              #  and recognition questions)
     "region": "top left",                    # abs group
     "relation": "left", "reference": {...},  # rel group: target is <relation> the reference
     "assert": {"color": "red"},              # confirmation: the claimed characteristic
     "ask": "color" | "shape" | "region"}     # recognition: what the answer names

Answer rules (paper 4.4): presence yes/no; counting the number; confirmation yes/no; recognition
the characteristic or region. ``<unk>`` marks an incoherent question - a relative question whose
reference object is absent (or not unique), a confirmation or recognition question whose subject
is absent or ambiguous ("is the circle blue?" with no circle) - and such questions are flagged
``absurd``. Subgroups follow the paper: np _1 present / _2 absent; abs _1
at the region / _2 elsewhere / _3 absent; rel _1 in the relation / _2 present but not in it /
_3 absent / _4 reference absent; recognition is always _1 (only asked about a unique subject).
The *focused* object deciding the subgroup is the target (presence, counting, recognition) or the
target with the claimed characteristic (confirmation). Levels (paper 5.1) count the concepts a
question needs: each target attribute, the region, the relation and each reference attribute, and
for confirmation / recognition the claimed or asked characteristic; level = min(4, concepts).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from lib.families.scrapbook.consistency import UNK, query_id
from lib.families.scrapbook.layout import relation as box_relation

DATA = Path(__file__).with_name("data")  # the family's templates, vocabulary and expressions

TYPES = ("presence", "counting", "confirmation", "recognition")
FORMS = ("original", "condition", "direction", "enumerated")
_SLOT = re.compile(r"\{(\w+)\}")
_IRREGULAR = {
    "sheep": "sheep",
    "mouse": "mice",
    "knife": "knives",
    "bus": "buses",
    "couch": "couches",
    "sandwich": "sandwiches",
    "toothbrush": "toothbrushes",
    "skis": "skis",
    "scissors": "scissors",
}


@lru_cache(maxsize=1)
def templates() -> dict:
    return yaml.safe_load((DATA / "templates.yaml").read_text())


@lru_cache(maxsize=1)
def expressions() -> dict:
    return yaml.safe_load((DATA / "expressions.yaml").read_text())


# --- evaluating a query on a scene ------------------------------------------------------------


def _matches(obj: dict, attrs: dict) -> bool:
    return (
        attrs.items() <= obj.items()
    )  # every described attribute equals the object's (C-level test)


def select(query: dict, scene: dict, attrs: dict | None = None) -> list[dict] | None:
    """The scene objects the query's description picks out (``None``: the reference is absent or
    not unique - "the red object" presupposes one)."""
    attrs = query["target"] if attrs is None else attrs
    objs = [o for o in scene["objects"] if _matches(o, attrs)]
    if query["group"] == "abs":
        objs = [o for o in objs if o["region"] == query["region"]]
    elif query["group"] == "rel":
        refs = [o for o in scene["objects"] if _matches(o, query["reference"])]
        if len(refs) != 1:
            return None
        objs = [
            o
            for o in objs
            if o is not refs[0] and box_relation(o["box"], refs[0]["box"]) == query["relation"]
        ]
    return objs


@dataclass(frozen=True)
class AnswerKind:
    """How a type's answer is read off the objects its query selects (``answer(chosen, query)``),
    and what its enumerated form lists before ``not applicable``
    (``choices(query, max_count, colors, shapes, regions)``)."""

    answer: Callable[[list[dict], dict], str]
    choices: Callable[..., list[str]]


def _exists(chosen: list[dict], query: dict) -> str:
    return "yes" if chosen else "no"


def _count(chosen: list[dict], query: dict) -> str:
    return str(len(chosen))


def _claim(chosen: list[dict], query: dict) -> str:
    if len(chosen) != 1:  # "is the circle red?" presupposes exactly one circle
        return UNK
    return "yes" if _matches(chosen[0], query["assert"]) else "no"


def _attribute(chosen: list[dict], query: dict) -> str:
    return chosen[0][query["ask"]] if len(chosen) == 1 else UNK  # one subject, as for claims


def _yes_no(
    query: dict, max_count: int, colors: list[str], shapes: list[str], regions: list[str]
) -> list[str]:
    return ["yes", "no"]


def _numbers(
    query: dict, max_count: int, colors: list[str], shapes: list[str], regions: list[str]
) -> list[str]:
    return [str(i) for i in range(max_count + 1)]


def _values(
    query: dict, max_count: int, colors: list[str], shapes: list[str], regions: list[str]
) -> list[str]:
    return {"color": colors, "shape": shapes, "region": regions}[query["ask"]]


# the answer kinds the types of templates.yaml name (`answer:`)
ANSWER_KINDS = {
    "exists": AnswerKind(_exists, _yes_no),
    "count": AnswerKind(_count, _numbers),
    "claim": AnswerKind(_claim, _yes_no),
    "attribute": AnswerKind(_attribute, _values),
}


def answer_kind(query: dict) -> AnswerKind:
    return ANSWER_KINDS[templates()[query["type"]]["answer"]]


def answer(query: dict, scene: dict) -> str:
    """The answer to ``query`` on ``scene`` (a string; ``<unk>`` when the question is incoherent)."""
    chosen = select(query, scene)
    return UNK if chosen is None else answer_kind(query).answer(chosen, query)


def focused(query: dict) -> dict:
    return {**query["target"], **query.get("assert", {})}


def subgroup(query: dict, scene: dict) -> int:
    if query["type"] == "recognition":
        return 1
    attrs = focused(query)
    present = [o for o in scene["objects"] if _matches(o, attrs)]
    if query["group"] == "np":
        return 1 if present else 2
    if query["group"] == "abs":
        if any(o["region"] == query["region"] for o in present):
            return 1
        return 2 if present else 3
    if sum(_matches(o, query["reference"]) for o in scene["objects"]) != 1:
        return 4
    if not present:
        return 3
    return 1 if select(query, scene, attrs) else 2


def concepts(query: dict) -> list[str]:
    out = [f"{k}:{v}" for k, v in sorted(query["target"].items())]
    if query["group"] == "abs":
        out.append(f"region:{query['region']}")
    elif query["group"] == "rel":
        out.append(f"relation:{query['relation']}")
        out += [f"reference_{k}:{v}" for k, v in sorted(query["reference"].items())]
    if query["type"] == "confirmation":
        out += [f"{k}:{v}" for k, v in query["assert"].items()]
    elif query["type"] == "recognition":
        out.append(f"ask:{query['ask']}")
    return out


def level(query: dict) -> int:
    return min(4, len(concepts(query)))


# --- paraphrases ------------------------------------------------------------------------------


def _an(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _plural(word: str) -> str:
    head, _, last = word.rpartition(" ")
    if last in _IRREGULAR:
        p = _IRREGULAR[last]
    elif last.endswith(("s", "sh", "ch", "x")):
        p = last + "es"
    else:
        p = last + "s"
    return f"{head} {p}" if head else p


def nouns(attrs: dict, plural: bool = False) -> list[str]:
    """Noun phrases for a description: ``red circle``, ``red object``, ``circle``, ``object``."""
    e = expressions()
    color, shape = attrs.get("color"), attrs.get("shape")
    if shape:
        base = [f"{color} {shape}" if color else shape]
        return [_plural(b) for b in base] if plural else base
    words = e["things"] if plural else e["thing"]
    return [f"{color} {w}" if color else w for w in words]


def _with_article(phrases: list[str]) -> list[str]:
    return [
        f"{art if art != 'a' else _an(p)} {p}" for p in phrases for art in expressions()["article"]
    ]


def region_phrases(region: str) -> list[str]:
    """Every way the templates say "at ``region``": "on the top left", "in the middle of the
    picture", "somewhere on the left half" (the side regions are also the paper's halves)."""
    e = expressions()
    on = "in" if region in e["in_regions"] else "on"
    out = [
        p.replace("{on}", on).replace("{r}", r)
        for p in e["at_region"]
        for r in e["regions"][region]
    ]
    if region in e["halves"]:
        out += [p.replace("{h}", e["halves"][region]) for p in e["at_half"]]
    return out


def slot_values(query: dict) -> dict[str, list[str]]:
    """Alternatives for every slot a template of this query may use."""
    e = expressions()
    values = {"image": e["image"], "where_any": e["where_any"]}
    target = query["target"]
    values["a_obj"] = _with_article(nouns(target))
    values["objs"] = nouns(target, plural=True)
    # after "how many items are": "circles" / "red circles", but a bare colour for "red objects"
    values["objs_pred"] = (
        nouns(target, plural=True) if "shape" in target else [target.get("color") or "here"]
    )
    values["subj"] = nouns(target)
    if query["group"] == "abs":
        values["at_region"] = region_phrases(query["region"])
    if query["group"] == "rel":
        values["rel"] = e["relations"][query["relation"]]
        values["the_ref"] = [f"the {n}" for n in nouns(query["reference"])]
    if query["type"] == "confirmation":
        ((key, val),) = query["assert"].items()
        values["prop"] = [val] if key == "color" else [f"{_an(val)} {val}"]
    return values


def _template_list(query: dict) -> list[str]:
    t = templates()[query["type"]][query["group"]]
    return t[query["ask"]] if query["type"] == "recognition" else t


def _freeze(values: dict[str, list[str]]) -> tuple:
    return tuple(sorted((k, tuple(v)) for k, v in values.items()))


@lru_cache(maxsize=65536)
def _expand(template_list: tuple[str, ...], frozen: tuple) -> tuple[str, ...]:
    values = dict(frozen)
    out = set()
    for template in template_list:
        slots = _SLOT.findall(template)
        for combo in itertools.product(*(values[s] for s in slots)):
            text = template
            for s, v in zip(slots, combo):
                text = text.replace("{" + s + "}", v, 1)
            if "{image}" in text:  # a slot value's own slot ("on the left of the {image}")
                out.update(text.replace("{image}", im) for im in values["image"])
            else:
                out.add(text)
    return tuple(sorted(out))


@lru_cache(maxsize=65536)
def _paraphrases(key: str) -> tuple[str, ...]:
    query = json.loads(key)
    return _expand(tuple(_template_list(query)), _freeze(slot_values(query)))


def paraphrases(query: dict, key: str | None = None) -> tuple[str, ...]:
    """Every paraphrase the templates and expression dictionary give for ``query`` (sorted);
    ``key``: its :func:`lib.families.scrapbook.consistency.query_id`, when the caller has it."""
    return _paraphrases(key or query_id(query))


def alternatives(
    query: dict, max_count: int, colors: list[str], shapes: list[str], regions: list[str]
) -> list[str]:
    """The enumerated-form choices; the last is always ``not applicable``."""
    return answer_kind(query).choices(query, max_count, colors, shapes, regions) + [
        templates()["not_applicable"]
    ]


def affixes(query: dict, alts: list[str]) -> dict[str, tuple[str, str]]:
    """``{form: (prefix, suffix)}``: a question in a form is ``prefix + question + suffix``."""
    f = templates()["forms"]
    key = query["ask"] if query["type"] == "recognition" else query["type"]
    listed = ", ".join(alts[:-1]) + ", or " + alts[-1]
    return {
        "original": ("", ""),
        "condition": ("", " " + f["condition"][key]),
        "direction": (f["direction"] + " ", ""),
        "enumerated": ("", " " + f["enumerated"].replace("{alternatives}", listed)),
    }


def render(text: str, form: str, query: dict, alts: list[str]) -> str:
    """The question ``text`` in ``form`` (one of :data:`FORMS`)."""
    prefix, suffix = affixes(query, alts)[form]
    return prefix + text + suffix
