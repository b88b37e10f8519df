"""Scrapbook's dataset rows: the question lines of one image (:func:`item_jsonl`, the lines of
``items.jsonl``), the structured queries behind them (:func:`queries`), and the :class:`Summary`
that counts them (paper 5.1-5.2's tables)."""

from __future__ import annotations

import json
import random
from collections import Counter
from functools import lru_cache

from lib.families.scrapbook import programs, questions
from lib.families.scrapbook.objects import vocabulary
from lib.families.scrapbook.params import ScrapbookParams
from lib.families.scrapbook.task import ScrapbookQA


def queries(
    scene: dict,
    colors: list[str] | None = None,
    shapes: list[str] | None = None,
    seed: int = 0,
    n_wrong_positions: int = ScrapbookParams.n_wrong_positions,
) -> list[dict]:
    """The structured queries asked about one image (paper 4.4 and 5.1): what the programs of
    ``lib/families/scrapbook/data/templates.yaml`` ask (each program's comment there says what it asks and
    why; :mod:`lib.families.scrapbook.programs` runs them), each query once, in order. Wrong values are
    drawn with the dataset's seed from the dataset's colours and shapes (by default the vocabulary's)."""
    return [
        q
        for _, q in programs.keyed_queries(
            scene, colors, shapes, seed, n_wrong_positions=n_wrong_positions
        )
    ]


def item_jsonl(
    scene: dict,
    params: ScrapbookParams,
    shapes: list[str],
    colors: list[str],
    summary: Summary | None = None,
) -> str:
    """The dataset rows of one image as JSONL text (one line per row): n paraphrases per query, in
    the four forms.

    Each line is one :class:`lib.core.schema.Item` (task :attr:`ScrapbookQA.name`), written by hand
    rather than with ``json.dumps(Item(...).to_dict())``: a Scrapbook set has hundreds of thousands
    of rows that share most of their JSON, so the pieces are encoded once per query and form, each
    row only escapes its paraphrase, and the rows' pieces are joined once per image rather than
    formatted into a string per row first (``json.dumps`` per row cost twice the PNG encoding of the
    whole dataset when profiled). The price is that the schema is spelt here a second time; a test
    checks that a line reads back into an Item and is written again byte for byte.
    """
    rng = random.Random(f"{params.seed}:q:{scene['id']}")
    image = compact_json([scene["image"]])
    head, mid = f'{{"id":"{scene["id"]}-', f'","task":{compact_json(ScrapbookQA.name)},"question":'
    parts: list[str] = []
    n = 0  # rows so far: the row's number in its id
    scene_json = (
        f',"image":"{scene["id"]}","parent":{compact_json(scene["parent"])},"unit":{compact_json(scene["unit"])},'
        '"form":"'
    )
    types, groups = set(params.types), set(params.groups)
    forms = tuple(f for f in questions.FORMS if f in params.forms)
    # what a kind of question (its type, or what it asks) shares on this image: its alternatives and,
    # per form, the question's JSON-escaped affixes and the row's end (scene, form, alternatives)
    per_kind: dict[str, tuple[list[str], list[tuple[str, str, str, str]]]] = {}
    for key, query in programs.keyed_queries(
        scene, colors, shapes, params.seed, n_wrong_positions=params.n_wrong_positions
    ):
        if query["type"] not in types or query["group"] not in groups:
            continue
        texts = questions.paraphrases(query, key)
        chosen = rng.sample(texts, min(params.n_questions_per_type, len(texts)))
        answer = questions.answer(query, scene)
        level, query_json = _query_json(key)
        subgroup = questions.subgroup(query, scene)
        kind = query["ask"] if query["type"] == "recognition" else query["type"]
        if kind not in per_kind:
            per_kind[kind] = _kind_pieces(kind, scene_json, forms, params, colors, shapes)
        alts, affixes = per_kind[kind]
        if summary is not None:
            meta = {"type": query["type"], "group": query["group"], "subgroup": subgroup}
            summary.add({**meta, "level": level, "query": query}, answer, len(chosen), forms)
        body, enumerated = _row_bodies(query, subgroup, query_json, image, answer, alts)
        pieces = [
            (pre, suf + (enumerated if form == "enumerated" else body), end)
            for form, pre, suf, end in affixes
        ]
        for j, text in enumerate(chosen):
            escaped, paraphrase = _encode_str(text)[1:-1], str(j)
            for pre, rest, end in pieces:
                parts += (head, f"{n:05d}", mid, '"', pre, escaped, rest, paraphrase, end)
                n += 1
    return "".join(parts)


def _kind_pieces(
    kind: str,
    scene_json: str,
    forms: tuple,
    params: ScrapbookParams,
    colors: list[str],
    shapes: list[str],
) -> tuple[list[str], list[tuple[str, str, str, str]]]:
    """What a kind of question shares on one image (:func:`item_jsonl`): its alternatives and, per
    form of ``forms``, ``(form, the question's JSON-escaped prefix, its suffix, the row's end)``."""
    alts = _alternatives(kind, params.objects_per_set, tuple(colors), tuple(shapes))
    return alts, [
        (
            form,
            _encode_str(pre)[1:-1],
            _encode_str(suf)[1:-1] + '"',
            f'{scene_json}{form}"'
            + (f',"alternatives":{_alts_json(tuple(alts))}' if form == "enumerated" else "")
            + "}}\n",
        )
        for form, (pre, suf) in _affixes(kind, tuple(alts)).items()
        if form in forms
    ]


def _row_bodies(
    query: dict, subgroup, query_json: str, image: str, answer: str, alts: list[str]
) -> tuple[str, str]:
    """A query's rows from the images on, up to their paraphrase number: ``(body, enumerated)``,
    the second the enumerated form's (an absurd question's answers with the last alternative, "not
    applicable")."""
    absurd = answer == questions.UNK
    # meta: type, group, subgroup, level, concepts, query, absurd, image, parent, unit, form[, alternatives]
    meta_json = (
        f'{{"type":"{query["type"]}","group":"{query["group"]}","subgroup":{subgroup},'
        f'{query_json},"absurd":{"true" if absurd else "false"},"paraphrase":'
    )
    body = f',"images":{image},"options":null,"answer":[{_encode_str(answer)}],"meta":{meta_json}'
    enumerated = (
        f',"images":{image},"options":null,"answer":[{_encode_str(alts[-1])}],"meta":{meta_json}'
        if absurd
        else body
    )
    return body, enumerated


class Summary:
    """Counts by type / group / subgroup / form / level, and the concept tables (paper 5.1-5.2)."""

    def __init__(self):
        # (type, group, subgroup, level, absurd, forms) -> questions in each of the forms: a query is
        # counted once, whatever its forms (``counts`` spells them out)
        self._queries: Counter = Counter()
        self.concepts: Counter = Counter()  # (level, kind, value, subgroup, type)
        self.answers: dict = {}  # (level, kind, value) -> set of answer classes seen
        self.images = 0

    def add(
        self, meta: dict, answer: str, paraphrases: int = 1, forms: tuple = questions.FORMS
    ) -> None:
        """Count ``paraphrases`` questions of one query in each of ``forms``."""
        m = meta
        absurd = answer == questions.UNK
        self._queries[(m["type"], m["group"], m["subgroup"], m["level"], absurd, tuple(forms))] += (
            paraphrases
        )
        if m["type"] in ("presence", "counting") and "original" in forms and m["level"] <= 2:
            t = m["query"]["target"]
            if m["level"] == 1 or m["group"] == "np" or (m["group"] == "abs" and len(t) == 1):
                kind = "color + object" if len(t) == 2 else ("color" if "color" in t else "object")
                value = " ".join(v for v in (t.get("color"), t.get("shape")) if v)
                self.concepts[(m["level"], kind, value, m["subgroup"], m["type"])] += paraphrases
                cls = (
                    "yes"
                    if answer == "yes"
                    else "no"
                    if answer == "no"
                    else "zero"
                    if answer == "0"
                    else "unk"
                    if answer == questions.UNK
                    else "positive"
                )
                self.answers.setdefault((m["level"], kind, value), set()).add(cls)

    def add_row(self, row: dict) -> None:
        """Count one stored row (used when merging shards)."""
        answer = row["answer"][0]
        if (
            row["meta"]["form"] == "enumerated"
            and answer == questions.templates()["not_applicable"]
        ):
            answer = questions.UNK
        self.add(row["meta"], answer, 1, (row["meta"]["form"],))

    @property
    def counts(self) -> Counter:
        """Questions by (type, group, subgroup, form, level, absurd)."""
        out: Counter = Counter()
        for (typ, group, sub, level, absurd, forms), n in self._queries.items():
            for form in forms:
                out[(typ, group, sub, form, level, absurd)] += n
        return out

    def rows(self) -> tuple[list[dict], list[dict]]:
        """The counts table and the concept table as lists of dicts (CSV-ready)."""
        counts = [
            dict(zip(("type", "group", "subgroup", "form", "level", "absurd"), k), questions=v)
            for k, v in sorted(self.counts.items())
        ]
        concepts = []
        for (lvl, kind, value, sub, typ), v in sorted(self.concepts.items()):
            seen = self.answers[(lvl, kind, value)]
            concepts.append(
                {
                    "level": lvl,
                    "concept": kind,
                    "value": value,
                    "subgroup": sub,
                    "type": typ,
                    "questions": v,
                    "enabled": {"yes", "no"} <= seen and {"zero", "positive"} <= seen,
                }
            )
        return counts, concepts

    def to_dict(self) -> dict:
        counts = self.counts

        def by(i: int) -> dict:
            return {
                str(k): v for k, v in sorted(_sum_by(counts, i).items(), key=lambda kv: str(kv[0]))
            }

        return {
            "images": self.images,
            "questions": sum(counts.values()),
            "by_type": by(0),
            "by_group": by(1),
            "by_subgroup": by(2),
            "by_form": by(3),
            "by_level": by(4),
            "absurd": by(5).get("True", 0),
        }


def _sum_by(counter: Counter, i: int) -> Counter:
    out: Counter = Counter()
    for k, v in counter.items():
        out[k[i]] += v
    return out


def compact_json(row) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


_encode_str = json.encoder.encode_basestring  # the C string escaper json.dumps itself uses


@lru_cache(maxsize=65536)
def _query_json(key: str) -> tuple[int, str]:
    """A query's level and its ``"level":..,"concepts":..,"query":..`` JSON (keys sorted), once per
    distinct query (``key``: its :func:`lib.families.scrapbook.consistency.query_id`)."""
    query = json.loads(key)
    concepts = questions.concepts(query)
    level = min(4, len(concepts))
    return (
        level,
        f'"level":{level},"concepts":{compact_json(concepts)},"query":{compact_json(query)}',
    )


@lru_cache(maxsize=256)
def _alts_json(alts: tuple) -> str:
    return compact_json(list(alts))


def _kind_query(kind: str) -> dict:
    """The part of a query that forms and alternatives depend on: its type, or what it asks."""
    return (
        {"type": "recognition", "ask": kind}
        if kind in ("color", "shape", "region")
        else {"type": kind}
    )


@lru_cache(maxsize=256)
def _affixes(kind: str, alts: tuple) -> dict:
    return questions.affixes(_kind_query(kind), list(alts))


@lru_cache(maxsize=256)
def _alternatives(kind: str, max_count: int, colors: tuple, shapes: tuple) -> list[str]:
    return questions.alternatives(
        _kind_query(kind), max_count, list(colors), list(shapes), list(vocabulary()["regions"])
    )
