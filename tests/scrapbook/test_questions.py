"""Queries, answers and paraphrases on hand-made scenes."""

import pytest

from lib.families.scrapbook import questions
from lib.families.scrapbook.layout import relation

SCENE = {
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
        {
            "index": 2,
            "role": "other",
            "shape": "triangle",
            "color": "red",
            "box": [1000, 600, 1150, 750],
            "region": "bottom right",
        },
    ]
}


@pytest.mark.parametrize(
    "query, answer, subgroup",
    [
        ({"type": "presence", "group": "np", "target": {"color": "red"}}, "yes", 1),
        ({"type": "counting", "group": "np", "target": {"color": "red"}}, "2", 1),
        ({"type": "counting", "group": "np", "target": {"shape": "hexagon"}}, "0", 2),
        (
            {
                "type": "presence",
                "group": "abs",
                "target": {"shape": "circle"},
                "region": "top left",
            },
            "yes",
            1,
        ),
        (
            {"type": "presence", "group": "abs", "target": {"shape": "circle"}, "region": "center"},
            "no",
            2,
        ),
        (
            {
                "type": "counting",
                "group": "abs",
                "target": {"shape": "hexagon"},
                "region": "center",
            },
            "0",
            3,
        ),
        (
            {
                "type": "presence",
                "group": "rel",
                "target": {"shape": "circle"},
                "relation": "upper left",
                "reference": {"shape": "square"},
            },
            "yes",
            1,
        ),
        (
            {
                "type": "presence",
                "group": "rel",
                "target": {"shape": "circle"},
                "relation": "lower right",
                "reference": {"shape": "square"},
            },
            "no",
            2,
        ),
        (
            {
                "type": "counting",
                "group": "rel",
                "target": {"shape": "hexagon"},
                "relation": "left",
                "reference": {"shape": "square"},
            },
            "0",
            3,
        ),
        (
            {
                "type": "presence",
                "group": "rel",
                "target": {"shape": "circle"},
                "relation": "left",
                "reference": {"shape": "pentagon"},
            },
            "<unk>",
            4,
        ),
        (
            {
                "type": "confirmation",
                "group": "np",
                "target": {"shape": "circle"},
                "assert": {"color": "red"},
            },
            "yes",
            1,
        ),
        (
            {
                "type": "confirmation",
                "group": "np",
                "target": {"shape": "circle"},
                "assert": {"color": "blue"},
            },
            "no",
            2,
        ),
        (
            {
                "type": "confirmation",
                "group": "np",
                "target": {"shape": "hexagon"},
                "assert": {"color": "blue"},
            },
            "<unk>",
            2,
        ),
        (
            {
                "type": "confirmation",
                "group": "abs",
                "target": {},
                "region": "bottom right",
                "assert": {"shape": "triangle"},
            },
            "yes",
            1,
        ),
        (
            {"type": "recognition", "group": "np", "target": {"shape": "square"}, "ask": "color"},
            "blue",
            1,
        ),
        (
            {"type": "recognition", "group": "np", "target": {"color": "red"}, "ask": "shape"},
            "<unk>",
            1,
        ),  # ambiguous
        (
            {
                "type": "recognition",
                "group": "rel",
                "target": {},
                "relation": "lower right",
                "reference": {"shape": "square"},
                "ask": "shape",
            },
            "triangle",
            1,
        ),
        (
            {
                "type": "recognition",
                "group": "np",
                "target": {"color": "blue", "shape": "square"},
                "ask": "region",
            },
            "center",
            1,
        ),
    ],
)
def test_answers_and_subgroups_follow_the_paper_rules(query, answer, subgroup):
    assert questions.answer(query, SCENE) == answer
    assert questions.subgroup(query, SCENE) == subgroup


@pytest.mark.parametrize(
    "query, level",
    [
        ({"type": "presence", "group": "np", "target": {"color": "red"}}, 1),
        (
            {"type": "recognition", "group": "np", "target": {"shape": "triangle"}, "ask": "color"},
            2,
        ),
        (
            {
                "type": "presence",
                "group": "abs",
                "target": {"color": "red"},
                "region": "center left",
            },
            2,
        ),
        (
            {
                "type": "counting",
                "group": "abs",
                "target": {"color": "red", "shape": "circle"},
                "region": "center left",
            },
            3,
        ),
        (
            {
                "type": "presence",
                "group": "rel",
                "target": {"color": "green"},
                "relation": "right",
                "reference": {"color": "red"},
            },
            3,
        ),
        (
            {
                "type": "counting",
                "group": "rel",
                "target": {"color": "red", "shape": "triangle"},
                "relation": "left",
                "reference": {"shape": "square"},
            },
            4,
        ),
        (
            {
                "type": "confirmation",
                "group": "rel",
                "target": {"shape": "circle"},
                "relation": "right",
                "reference": {"color": "blue"},
                "assert": {"color": "green"},
            },
            4,
        ),
    ],
)
def test_levels_match_the_papers_examples(query, level):
    assert questions.level(query) == level


def test_relations_are_the_eight_of_figure_8():
    ref = (500, 300, 600, 400)
    assert relation((300, 100, 400, 200), ref) == "upper left"
    assert relation((520, 100, 580, 200), ref) == "above"
    assert relation((700, 320, 800, 380), ref) == "right"
    assert relation((700, 450, 800, 500), ref) == "lower right"
    assert relation((550, 350, 560, 360), ref) is None  # overlapping boxes


def test_templates_expand_into_many_paraphrases():
    q = {
        "type": "presence",
        "group": "abs",
        "target": {"color": "red", "shape": "circle"},
        "region": "top left",
    }
    texts = questions.paraphrases(q)
    assert len(texts) >= 20 and len(set(texts)) == len(texts)
    assert "is there a red circle on the top left?" in texts
    assert all("{" not in t for t in texts)
    q = {"type": "counting", "group": "np", "target": {"color": "orange"}}
    assert "how many orange objects are there in the image?" in questions.paraphrases(q)


def test_rendered_forms_snapshot():
    q = {"type": "presence", "group": "np", "target": {"shape": "circle"}}
    alts = questions.alternatives(q, 5, [], [], [])
    text = "is there a circle in the image?"
    assert [questions.render(text, f, q, alts) for f in questions.FORMS] == [
        "is there a circle in the image?",
        "is there a circle in the image? answer yes or no, when applicable.",
        "based on the scene, answer this question with a short sentence: is there a circle in the image?",
        "is there a circle in the image? choose one of the alternatives: yes, no, or not applicable.",
    ]
