"""Query programs: which structured queries a scene gets, read from the templates' data.

``lib/families/scrapbook/data/templates.yaml`` holds, under ``programs``, one program per group of question
types (its comment there says how a program reads); :func:`keyed_queries` runs them on a scene.
Like clevr-dataset-gen's templates, which carry their functional program, the data says what is
asked and :data:`HANDLERS` is the small table of functions a program calls: the scene's targets and
reference descriptions, where a description is, the claims made about an object, the wrong values
drawn with the seed. A program is compiled once into nested closures, a loop per clause, so a
scene's queries cost no parsing.

Choices where the paper is silent (see also :mod:`lib.families.scrapbook.generate`): the wrong absolute
positions of an object are where the unit's other objects are or will be added, completed to
``n_wrong_positions`` by seeded draws (:func:`wrong_regions`); wrong colours and shapes are drawn
with the seed from the dataset's own values; a relative question with a two-attribute subject
describes its reference by one attribute, so no question needs more than the paper's four concepts.
"""

from __future__ import annotations

import inspect
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from lib.families.scrapbook import questions
from lib.families.scrapbook.consistency import query_id
from lib.families.scrapbook.layout import relation
from lib.families.scrapbook.objects import vocabulary

OPPOSITE = {
    "upper left": "lower right",
    "above": "below",
    "upper right": "lower left",
    "left": "right",
    "right": "left",
    "lower left": "upper right",
    "below": "above",
    "lower right": "upper left",
}
ATTRIBUTES = (
    "color",
    "shape",
)  # what an object is described by, in the order questions ask about them


class Obj(NamedTuple):
    """An arrangement object as programs see it: its description and its scene record (None: absent)."""

    attrs: dict
    rec: dict | None


def descriptors(attrs: dict) -> list[dict]:
    """The ways of describing an object: by shape, by colour, by both (a cut-out: its class)."""
    if attrs.get("color") is None:
        return [{"shape": attrs["shape"]}]
    return [
        {"shape": attrs["shape"]},
        {"color": attrs["color"]},
        {"color": attrs["color"], "shape": attrs["shape"]},
    ]


def _unique(dicts) -> list[dict]:
    seen, out = set(), []
    for d in dicts:
        key = query_id(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _attrs(obj: dict) -> dict:
    return {k: obj[k] for k in ("shape", "color") if obj.get(k) is not None}


def wrong_regions(
    correct: set[str], unit_regions: list[str], n: int, rng: random.Random
) -> list[str]:
    """``n`` wrong absolute positions for an object at ``correct``: first where the unit's other
    objects are or will be added (paper 4.4), then regions drawn with the seed (Table 6's counts
    need 3 per object and image; a unit of x=3 objects names at most 2)."""
    named = [r for r in dict.fromkeys(unit_regions) if r not in correct]
    rest = [r for r in vocabulary()["regions"] if r not in correct and r not in named]
    return (named + rng.sample(rest, max(0, min(len(rest), n - len(named)))))[:n]


class Facts:
    """What the handlers read of one scene, worked out once, and the scene's seeded RNG."""

    def __init__(
        self, scene: dict, colors: list[str], shapes: list[str], seed: int, n_wrong_positions: int
    ):
        self.scene, self.colors, self.shapes, self.n_wrong = (
            scene,
            colors,
            shapes,
            n_wrong_positions,
        )
        self.rng = random.Random(f"{seed}:wrong:{scene['id']}")
        self.order = vocabulary()["regions"]
        present = [_attrs(o) for o in scene["objects"]]
        absent = [_attrs(a) for a in scene["absent"]]
        self.present = [Obj(a, o) for a, o in zip(present, scene["objects"])]
        self.objects = self.present + [Obj(a, None) for a in absent]
        self.targets = _unique(
            [d for o in present + absent for d in descriptors(o)]
            + [
                {"color": p["color"], "shape": a["shape"]}
                for p in present
                for a in absent[:1]
                if "color" in p and a["shape"] != p["shape"]
            ]
        )
        here = [o["region"] for o in scene["objects"]]
        self.unit_regions = scene.get("unit_regions") or here + list(scene["region_pair"])
        self.region_list = sorted(set(self.unit_regions) | set(here), key=self.order.index)
        self.ref_obj = next((o for o in scene["objects"] if o["role"] == "reference"), None)
        self.ref_attrs = _attrs(
            self.ref_obj or next(a for a in scene["absent"] if a.get("role") == "reference")
        )
        self.present_keys = {query_id(d) for o in present for d in descriptors(o)}


# --- the handlers a program calls: (facts, *arguments) -> a value, a list to loop over, or a test --


def _described(x) -> dict:
    return x.attrs if isinstance(x, Obj) else x


def at_regions(f: Facts, x) -> list[str]:
    """Where a description is asked about: its objects' regions and wrong ones, or the unit's."""
    attrs = _described(x)
    correct = {o["region"] for o in f.scene["objects"] if attrs.items() <= o.items()}
    if not correct:
        return f.region_list
    return sorted(correct, key=f.order.index) + wrong_regions(
        correct, f.unit_regions, f.n_wrong, f.rng
    )


def claims(f: Facts, obj: Obj, key: str) -> list[dict]:
    """The true claim about ``key`` and a wrong one drawn with the seed from the dataset's values."""
    true = obj.attrs[key]
    pool = [v for v in (f.colors if key == "color" else f.shapes) if v != true]
    return [{key: v} for v in (true, f.rng.choice(pool) if pool else None) if v is not None]


def single_attributes(f: Facts, obj: Obj, but: str) -> list[dict]:
    """The object described by one attribute other than ``but`` ("the circle" when asking its colour)."""
    return [{k: v} for k, v in sorted(obj.attrs.items()) if k != but]


def relation_to_reference(f: Facts, obj: Obj) -> str | None:
    """Where the object is relative to the reference (the unit's relation when the reference is absent)."""
    return (
        relation(obj.rec["box"], f.ref_obj["box"]) if f.ref_obj is not None else f.scene["relation"]
    )


HANDLERS: dict[str, Callable] = {
    "targets": lambda f: f.targets,
    "objects": lambda f: f.objects,
    "present_objects": lambda f: f.present,
    "reference_descriptions": lambda f: descriptors(f.ref_attrs),
    "reference_attributes": lambda f: [{k: v} for k, v in sorted(f.ref_attrs.items())],
    "reference_present": lambda f: f.ref_obj is not None,
    "unit_relation": lambda f: f.scene["relation"],
    "both_ways": lambda f, rel: [rel, OPPOSITE[rel]],
    "at_regions": at_regions,
    "same": lambda f, a, b: a == b,
    # target + relation + reference: at most the paper's four concepts
    "within_four_concepts": lambda f, target, reference: len(target) + len(reference) <= 3,
    # with the reference absent, the present objects' descriptors suffice to ask for <unk>
    "relatable": lambda f, target: f.ref_obj is not None or query_id(target) in f.present_keys,
    "attributes": lambda f, obj: [k for k in ATTRIBUTES if k in obj.attrs],
    "attributes_and_region": lambda f, obj: [k for k in ATTRIBUTES if k in obj.attrs] + ["region"],
    "single_attributes": single_attributes,
    "bare_or": lambda f, subjects: [{}] + subjects,  # {}: the object named by its position alone
    "descriptions": lambda f, obj: descriptors(obj.attrs),
    "claims": claims,
    "present": lambda f, obj: obj.rec is not None,
    "is_reference": lambda f, obj: f.ref_obj is not None and obj.rec is f.ref_obj,
    "relation_to_reference": relation_to_reference,
    "region_of": lambda f, obj: obj.rec["region"],
}
# tests a program's `keep` applies to each query it asks
KEEP: dict[str, Callable] = {
    "answerable": lambda f, query: questions.answer(query, f.scene) != questions.UNK
}


# --- compiling a program -------------------------------------------------------------------------

_CLAUSE = re.compile(
    r"(?:(?P<test>if|unless) (?P<cond>.+)|(?P<name>\w+) (?P<op>in|=) (?P<source>.+))"
)
_TOKEN = re.compile(r"\s*(\w+|[(),])")
Run = Callable[[Facts, dict, Callable], None]  # (facts, bindings, emit)


class ProgramError(ValueError):
    """A program in templates.yaml that cannot run, named with the clause at fault."""


def _split(text: str) -> list[str]:
    """``a, f(b, c), d`` -> its clauses (commas inside calls stay)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return out + [text[start:].strip()] if text.strip() else out


def _expr(text: str, bound: set[str], consts: dict, where: str):
    """Compile ``name`` or ``handler(arg, ...)`` into ``(facts, bindings) -> value``."""
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != re.sub(r"\s", "", text):
        raise ProgramError(f"{where}: cannot read {text!r}")
    value, rest = _parse(tokens, bound, consts, where)
    if rest:
        raise ProgramError(f"{where}: unexpected {' '.join(rest)!r} in {text!r}")
    return value


def _parse(tokens: list[str], bound: set[str], consts: dict, where: str):
    name, rest = tokens[0], tokens[1:]
    if not rest or rest[0] != "(":
        if name in bound:
            return (lambda f, env: env[name]), rest
        if name in consts:
            return (lambda f, env, v=consts[name]: v), rest
        return _call(name, [], where), rest
    args, rest = [], rest[1:]
    while rest and rest[0] != ")":
        arg, rest = _parse(rest, bound, consts, where)
        args.append(arg)
        rest = rest[1:] if rest and rest[0] == "," else rest
    if not rest:
        raise ProgramError(f"{where}: unclosed call of {name!r}")
    return _call(name, args, where), rest[1:]


def _call(name: str, args: list, where: str):
    handler = HANDLERS.get(name)
    if handler is None:
        raise ProgramError(
            f"{where}: {name!r} is neither a bound name nor a handler ({', '.join(sorted(HANDLERS))})"
        )
    arity = len(inspect.signature(handler).parameters) - 1
    if arity != len(args):
        raise ProgramError(f"{where}: {name} takes {arity} argument(s), given {len(args)}")
    if not args:
        return lambda f, env: handler(f)
    if len(args) == 1:
        a = args[0]
        return lambda f, env: handler(f, a(f, env))
    return lambda f, env: handler(f, *(a(f, env) for a in args))


def _clause(text: str, bound: set[str], consts: dict, where: str):
    """One clause -> ``(wrap, names it binds)``; ``wrap(inner)`` runs ``inner`` per binding."""
    m = _CLAUSE.fullmatch(text)
    if m is None:
        raise ProgramError(
            f"{where}: {text!r} is no clause (NAME in SOURCE, NAME = SOURCE, if TEST, unless TEST)"
        )
    if m["test"]:
        test, holds = _expr(m["cond"], bound, consts, where), m["test"] == "if"

        def wrap(inner):
            def when(f, env, emit):
                if bool(test(f, env)) == holds:
                    inner(f, env, emit)

            return when

        return wrap, set()
    name, source = m["name"], _expr(m["source"], bound, consts, where)
    if m["op"] == "=":

        def wrap(inner):
            def let(f, env, emit):
                env[name] = source(f, env)
                inner(f, env, emit)

            return let

        return wrap, {name}

    def wrap(inner):
        def each(f, env, emit):
            for value in source(f, env):
                env[name] = value
                inner(f, env, emit)

        return each

    return wrap, {name}


def _ask(fields: dict, bound: set[str], where: str) -> Run:
    refs = {k: v[1:] for k, v in fields.items() if isinstance(v, str) and v.startswith("$")}
    for k, name in refs.items():
        if name not in bound:
            raise ProgramError(
                f"{where}: ask field {k}: ${name} is not bound here (bound: {sorted(bound)})"
            )
    fields = list(fields.items())

    def ask(f, env, emit):
        emit({k: env[refs[k]] if k in refs else v for k, v in fields})

    return ask


def _step(step: dict, bound: set[str], consts: dict, where: str) -> Run:
    wraps = []
    for i, text in enumerate(_split(step.get("for", ""))):
        wrap, names = _clause(text, bound, consts, f"{where}, clause {i + 1}")
        wraps.append(wrap)
        bound = bound | names
    if ("ask" in step) == ("do" in step):
        raise ProgramError(f"{where}: a step has either `ask` or `do`, got {sorted(step)}")
    if "ask" in step:
        run = _ask(step["ask"], bound, where)
    else:
        inner = [
            _step(s, bound, consts, f"{where} > step {j + 1}") for j, s in enumerate(step["do"])
        ]

        def run(f, env, emit):
            for r in inner:
                r(f, env, emit)

    for wrap in reversed(wraps):
        run = wrap(run)
    return run


@dataclass(frozen=True)
class Program:
    """A compiled program: the types it asks about, ``run(facts, {}, emit)``, and its ``keep`` test."""

    types: tuple[str, ...]
    run: Run
    keep: Callable | None


def compile_program(spec: dict, where: str = "program") -> Program:
    """One entry of ``templates.yaml`` ``programs`` as nested closures; a clause that cannot run
    raises :class:`ProgramError` naming ``where``, the step and the clause."""
    if spec.get("keep") is not None and spec["keep"] not in KEEP:
        raise ProgramError(f"{where}: keep: {spec['keep']!r} is not one of {sorted(KEEP)}")
    consts = {"types": list(spec["types"])}
    steps = [_step(s, set(), consts, f"{where} step {j + 1}") for j, s in enumerate(spec["steps"])]

    def run(f, env, emit):
        for s in steps:
            s(f, env, emit)

    return Program(tuple(spec["types"]), run, KEEP.get(spec.get("keep")))


@lru_cache(maxsize=1)
def programs() -> tuple[Program, ...]:
    """The programs of ``templates.yaml``, compiled once per process."""
    return tuple(
        compile_program(
            spec,
            f"lib/families/scrapbook/data/templates.yaml programs[{i}] ({', '.join(spec['types'])})",
        )
        for i, spec in enumerate(questions.templates()["programs"])
    )


def keyed_queries(
    scene: dict,
    colors: list[str] | None = None,
    shapes: list[str] | None = None,
    seed: int = 0,
    *,
    n_wrong_positions: int,
    compiled: tuple[Program, ...] | None = None,
) -> list[tuple[str, dict]]:
    """``(query_id, query)`` of every query the programs (``compiled``; by default :func:`programs`)
    ask about ``scene``, each once, in order; wrong values come from ``colors`` and ``shapes`` (by
    default the vocabulary's), ``n_wrong_positions`` wrong regions per present object (the
    generator's parameter)."""
    vocab = vocabulary()
    facts = Facts(
        scene,
        list(colors or vocab["colors"]),
        list(shapes or vocab["shapes"]),
        seed,
        n_wrong_positions,
    )
    out: list[tuple[str, dict]] = []
    seen: set[str] = set()
    for program in programs() if compiled is None else compiled:
        keep = program.keep

        def emit(query: dict) -> None:
            key = query_id(query)
            if key not in seen and (keep is None or keep(facts, query)):  # noqa: B023 - called within this iteration
                seen.add(key)
                out.append((key, query))

        program.run(facts, {}, emit)
    return out
