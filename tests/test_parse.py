import pytest

from lib.core.answers import parse_choice, parse_json, parse_response
from lib.core.schema import Constraint


@pytest.mark.parametrize(
    "text, choices, expected, method",
    [
        ("yes", ("yes", "no"), "yes", "parse:exact"),
        (" No. ", ("yes", "no"), "no", "parse:exact"),
        ("B) because it is blue", ("A", "B", "C"), "B", "parse:letter"),
        ("(c)", ("A", "B", "C"), "C", "parse:letter"),
        ("I think the answer is yes, clearly", ("yes", "no"), "yes", "parse:contains"),
        ("yes and no", ("yes", "no"), None, "invalid"),  # ambiguous: never pick one
        ("nothing useful", ("yes", "no"), None, "invalid"),
        ("eyes open", ("yes", "no"), None, "invalid"),  # 'yes' inside a word is not an answer
    ],
)
def test_parse_choice_never_guesses(text, choices, expected, method):
    assert parse_choice(text, choices) == (expected, method)


def test_parse_json_checks_schema_and_finds_embedded_object():
    schema = {
        "type": "object",
        "properties": {"rating": {"type": "integer", "minimum": 1, "maximum": 3}},
        "required": ["rating"],
    }
    assert parse_json('Sure! {"rating": 2} hope it helps', schema) == ({"rating": 2}, "parse:json")
    assert parse_json('{"rating": 7}', schema) == (None, "invalid")
    assert parse_json('{"rating": 2', schema) == (None, "invalid")


def test_parse_response_keeps_free_text():
    assert parse_response("anything", None) == ("anything", "free", True)
    assert parse_response("maybe", Constraint(choices=("yes", "no"))) == (None, "invalid", False)


def test_constraint_validation():
    with pytest.raises(ValueError, match="exactly one"):
        Constraint()
    with pytest.raises(ValueError, match="distinct"):
        Constraint(choices=("a", "a"))
