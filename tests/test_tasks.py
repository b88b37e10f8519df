"""Tasks: rendered prompts (snapshots), closed answer sets, and answer reading that never guesses."""

import json
import os
from pathlib import Path

import pytest

from lib.core.schema import Item
from lib.families.memeqa.importer import import_memeqa
from lib.families.memeqa.task import letter_sets, parse_letter_set
from lib.families.yesbut.datasets import yesbut_datasets
from lib.stages.setup import demo_datasets
from lib.tasks.registry import task_of

from .support.data import SHARED_DATA

SNAPSHOT = Path(__file__).parent / "snapshots" / "prompts.json"
MEMEQA = SHARED_DATA / "memeqa"


def build_prompt(item, root):
    return task_of(item).prompt(item, root)


def read_answer(item, text):
    return task_of(item).reader.read(item, text, task_of(item).choices(item))


def target(item):
    return task_of(item).reader.target(item)


def _scrapbook_item(form="enumerated"):
    return Item(
        id="s-1",
        task="scrapbook.qa",
        images=["images/s.png"],
        answer=["red"],
        question="what is the color of the circle? choose one of the alternatives: red, blue, or not applicable.",
        meta={
            "form": form,
            "type": "recognition",
            "alternatives": ["red", "blue", "not applicable"],
            "query": {"type": "recognition", "ask": "color"},
        },
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from lib.io import load_items

    folders = demo_datasets(tmp_path_factory.mktemp("demo"))
    return {name: load_items(folder) for name, folder in folders.items()}


def _rendered(demo) -> dict:
    pick = {
        "mcq single": demo["mcq"][0],
        "mcq multi (N for none)": demo["mcq"][4],
        "yesbut.detection": demo["yesbut"][0],
        "yesbut.understanding left": demo["yesbut"][1],
        "yesbut.understanding whole": demo["yesbut"][3],
        "yesbut.completion": next(i for i in demo["yesbut"] if i.task == "yesbut.completion"),
        "vqa.open": demo["vqa"][0],
        "scrapbook.qa enumerated": _scrapbook_item(),
    }
    out = {}
    for name, item in pick.items():
        p = build_prompt(item, "ROOT")
        out[name] = {
            "text": p.text,
            "images": list(p.images),
            "choices": list(p.choices) if p.choices else None,
            "answer_trigger": p.answer_trigger,
        }
    return out


def test_rendered_prompts_match_the_snapshot(demo):
    """Prompts are data (each family's prompts.yaml); a change there must be deliberate:
    regenerate with UPDATE_SNAPSHOTS=1 and review the diff."""
    rendered = _rendered(demo)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(rendered, indent=1, ensure_ascii=False) + "\n")
    assert rendered == json.loads(SNAPSHOT.read_text())


def test_the_papers_prompts_are_used_verbatim(demo):
    det = build_prompt(demo["yesbut"][0], "ROOT").text
    assert det.startswith("You are an AI expert in detecting humour or satire.")
    assert det.endswith('Output format: one character, exactly either "Y" or "N"')
    whole = build_prompt(demo["yesbut"][3], "ROOT")
    assert whole.text == "Why is this image funny/satirical?" and whole.choices is None
    assert build_prompt(demo["yesbut"][1], "ROOT").text == "Describe the image"


def test_multi_answer_sets_and_parsing():
    assert letter_sets(3, True) == ("A", "B", "C", "A, B", "A, C", "B, C", "A, B, C", "N")
    assert parse_letter_set("A, C", 4, True) == {0, 2}
    assert parse_letter_set("b and d.", 4, True) == {1, 3}
    assert parse_letter_set("ACD", 4, True) == {0, 2, 3} and parse_letter_set("ABCD", 4, True) == {
        0,
        1,
        2,
        3,
    }
    assert parse_letter_set("The answers are: A and C.", 4, True) == {0, 2}
    assert (
        parse_letter_set("a cat", 4, True) is None
        and parse_letter_set("a bad idea", 4, True) is None
    )
    assert parse_letter_set("N", 4, True) == frozenset()
    assert (
        parse_letter_set("N", 4, False) is None
    )  # a "None of the above" option exists: N is not an answer
    assert parse_letter_set("A, E", 4, True) is None
    assert parse_letter_set("I think A", 4, True) is None


@pytest.mark.needs_data("memeqa")
@pytest.mark.parametrize("variant", ["none-minus", "none-plus"])
def test_memeqa_items_become_prompts_and_targets(variant):
    items = import_memeqa(MEMEQA / variant / "dev.json")
    for item in items:
        p = build_prompt(item, "ROOT")
        n = len(item.options)
        assert f"{'ABCD'[n - 1]}. {item.options[-1]}" in p.text
        if item.meta["general_type"] == "single":
            assert p.choices == tuple("ABCD"[:n]) and target(item) == "ABCD"[item.answer[0]]
        else:
            none_option = item.options[-1] == "None of the above"
            assert ("N" in p.choices) is (not none_option) and len(p.choices) == 2**n - 1 + (
                not none_option
            )
            gold = ", ".join("ABCD"[i] for i in item.answer) or "N"
            assert read_answer(item, gold)[0] == target(
                item
            )  # the gold answer, written out, reads back
    assert {i.meta["specific_type"] for i in items} and len(
        {i.meta["specific_type"] for i in items}
    ) == 11


GARBAGE = [
    "",
    "   ",
    "这是一只猫",
    "A, B",
    '{"answer": "B"}',
    "B",
    "The answer is (C).",
    "a cat",
    "Y N",
    "yes",
]


@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_is_read_or_invalid_never_guessed(text, demo):
    single, multi, det = demo["mcq"][0], demo["mcq"][4], demo["yesbut"][0]
    for item in (single, multi, det, _scrapbook_item()):
        value, method = read_answer(item, text)
        choices = build_prompt(item, ".").choices
        if value is None:
            assert method == "invalid"
        elif item is multi:
            assert isinstance(value, frozenset)
        else:
            assert value in choices  # a read answer is always one of the allowed ones
    assert read_answer(single, "A, B")[0] is None  # several letters for a single answer
    assert read_answer(single, "a cat")[0] is None  # a lower-case article is not option A
    assert read_answer(det, "Y N")[0] is None


@pytest.mark.needs_data("yesbut")
@pytest.mark.slow
def test_yesbut_tasks_from_the_collected_sample(tmp_path):
    from lib.families.yesbut.collect import collect_yesbut
    from lib.io import load_items

    recs, _ = collect_yesbut(SHARED_DATA / "yesbut", progress=False)
    records = [r.to_dict() for r in recs]
    items = load_items(yesbut_datasets(records, tmp_path))
    by_task = {
        t: [i for i in items if i.task == t]
        for t in ("yesbut.detection", "yesbut.understanding", "yesbut.completion")
    }
    assert len(by_task["yesbut.detection"]) == len(records) == 443
    assert sum(i.answer == ["Y"] for i in by_task["yesbut.detection"]) == sum(
        r["label"] == "satirical" for r in records
    )
    parts = {i.meta["part"] for i in by_task["yesbut.understanding"]}
    assert parts == {"left", "right", "whole"}
    # every satirical image whose scene is annotated: the 283 originals and their satirical restylings
    restyled = [
        r
        for r in records
        if r["stage"] in (3, 4)
        and r["label"] == "satirical"
        and (by_id := {x["id"]: x for x in records}).get(r.get("original"), {}).get("annotation")
    ]
    wholes = [i for i in by_task["yesbut.understanding"] if i.meta["part"] == "whole"]
    assert len(wholes) == 283 + len(restyled) and {i.meta["stage"] for i in wholes} == {2, 3, 4}
    assert {i.meta["difficulty"] for i in wholes} <= {"EASY", "MEDIUM", "HARD"} and {
        i.meta["text"] for i in wholes
    } == {"Y", "N"}
    for i in wholes:
        if i.meta["stage"] != 2:  # a restyling is scored against its original's annotation
            assert i.answer == [by_id[i.meta["original"]]["annotation"]["overall_description"]]
    assert by_task["yesbut.completion"]  # the sample holds at least one curated pair
    by_id = {r["id"]: r for r in records}
    for item in by_task["yesbut.completion"]:
        sat, non = by_id[item.meta["satirical_from"]], by_id[item.meta["non_satirical_from"]]
        assert sat["label"] == "satirical" and non["label"] == "non_satirical"
        assert sat["original"] == non["original"] == item.meta["original"]
        side = "left" if item.meta["missing"] == "yes" else "right"
        assert sat[f"{side}_style"] != non[f"{side}_style"]  # one 2D stick, one 3D option
        assert build_prompt(item, tmp_path).choices == ("A", "B")
