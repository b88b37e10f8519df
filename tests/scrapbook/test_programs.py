"""The query programs of templates.yaml, one query identity for generation and scoring, and the
hand-assembled item writer."""

import json

import pytest

from lib.config import resolve
from lib.core.schema import Item
from lib.families.scrapbook import programs, questions
from lib.families.scrapbook.consistency import query_id
from lib.families.scrapbook.items import item_jsonl, queries
from lib.families.scrapbook.params import ScrapbookParams
from lib.families.scrapbook.task import ScrapbookQA
from lib.stages.scrapbook import ScrapbookConfig

SCENE = {
    "id": "s0_b0_a0_p0_x2",
    "relation": "upper left",
    "region_pair": ["top left", "center"],
    "unit_regions": ["top left", "center", "bottom right"],
    "objects": [
        {
            "index": 0,
            "role": "main",
            "shape": "circle",
            "color": "red",
            "box": [100, 100, 170, 170],
            "region": "top left",
        },
        {
            "index": 1,
            "role": "reference",
            "shape": "square",
            "color": "blue",
            "box": [600, 400, 710, 510],
            "region": "center",
        },
    ],
    "absent": [{"shape": "triangle", "color": "green", "role": "other"}],
}

N_WRONG = ScrapbookParams.n_wrong_positions  # the generator's default


def test_every_type_is_asked_by_one_program_and_names_its_answer_kind():
    asked = [t for p in programs.programs() for t in p.types]
    assert sorted(asked) == sorted(questions.TYPES)
    assert all(
        questions.templates()[t]["answer"] in questions.ANSWER_KINDS for t in questions.TYPES
    )


def test_a_program_runs_its_clauses_as_nested_loops():
    spec = {
        "types": ["presence", "counting"],
        "steps": [
            {
                "for": "target in targets, type in types, if within_four_concepts(target, target)",
                "ask": {"type": "$type", "group": "np", "target": "$target"},
            }
        ],
    }
    got = [
        q
        for _, q in programs.keyed_queries(
            SCENE, n_wrong_positions=N_WRONG, compiled=(programs.compile_program(spec),)
        )
    ]
    facts = programs.Facts(SCENE, ["red", "blue", "green"], ["circle", "square", "triangle"], 0, 3)
    assert got == [
        {"type": k, "group": "np", "target": t}
        for t in facts.targets
        for k in ("presence", "counting")
        if 2 * len(t) <= 3
    ]
    assert got and all(len(q["target"]) == 1 for q in got)


@pytest.mark.parametrize(
    "step, message",
    [
        (
            {"for": "target in nowhere", "ask": {"type": "presence"}},
            "'nowhere' is neither a bound name nor a handler",
        ),
        (
            {
                "for": "target in targets, region in at_regions(target, target)",
                "ask": {"type": "presence"},
            },
            "at_regions takes 1 argument",
        ),
        (
            {"for": "target in targets", "ask": {"type": "presence", "region": "$region"}},
            "$region is not bound here",
        ),
        ({"for": "target of targets", "ask": {"type": "presence"}}, "is no clause"),
        (
            {"for": "target in targets", "ask": {"type": "presence"}, "do": []},
            "either `ask` or `do`",
        ),
    ],
)
def test_a_program_that_cannot_run_names_the_clause(step, message):
    with pytest.raises(programs.ProgramError, match="demo step 1") as e:
        programs.compile_program({"types": ["presence"], "steps": [step]}, "demo")
    assert message in str(e.value)


def test_a_scene_gets_each_query_once_and_recognition_only_where_it_has_an_answer():
    keyed = programs.keyed_queries(SCENE, n_wrong_positions=N_WRONG)
    keys = [k for k, _ in keyed]
    assert len(keys) == len(set(keys)) and all(k == query_id(q) for k, q in keyed)
    assert {q["type"] for _, q in keyed} == set(questions.TYPES)
    assert all(
        questions.answer(q, SCENE) != questions.UNK for _, q in keyed if q["type"] == "recognition"
    )
    assert queries(SCENE) == [q for _, q in keyed]
    assert (
        programs.keyed_queries(SCENE, seed=1, n_wrong_positions=N_WRONG) != keyed
    )  # wrong claims and positions are drawn with the seed
    assert programs.keyed_queries(
        SCENE, seed=1, n_wrong_positions=N_WRONG
    ) == programs.keyed_queries(SCENE, seed=1, n_wrong_positions=N_WRONG)


def _first_scene(folder):
    with open(folder / "scenes.jsonl") as f:
        return json.loads(f.readline())


def test_generation_and_scoring_share_one_query_identity(unique_all):
    out, _ = unique_all
    params = resolve(ScrapbookConfig, "unique_all").cfg.params()
    scene = _first_scene(out)
    asked = {
        k
        for k, _ in programs.keyed_queries(
            scene,
            params.colors,
            params.shapes,
            params.seed,
            n_wrong_positions=params.n_wrong_positions,
        )
    }
    task, seen = ScrapbookQA(), set()
    with open(out / "items.jsonl") as f:
        for line in f:
            item = Item.from_dict(json.loads(line))
            if item.meta["image"] != scene["id"]:
                break
            seen.add(task.unit(item).key[1])  # the scorer's key of the item's query
    assert seen == asked
    q = json.loads(next(iter(asked)))
    assert (
        questions.paraphrases(q) == questions.paraphrases(q, query_id(q))
        and json.loads(query_id(q)) == q
    )


def test_the_fast_item_writer_writes_what_the_schema_would(unique_all):
    out, _ = unique_all
    params = resolve(ScrapbookConfig, "unique_all").cfg.params()
    scene = _first_scene(out)
    lines = [
        line + "\n"
        for line in item_jsonl(scene, params, list(params.shapes), list(params.colors)).split("\n")[
            :-1
        ]
    ]
    with open(out / "items.jsonl") as f:
        assert lines == [f.readline() for _ in lines]  # what the dataset holds
    forms = set()
    for line in lines:
        item = Item.from_dict(json.loads(line))
        assert line == json.dumps(item.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
        assert item.task == ScrapbookQA.name
        forms.add(item.meta["form"])
    assert forms == set(questions.FORMS)
