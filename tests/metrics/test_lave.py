"""LAVE: the prompt, the rating parser that never guesses, and a judge behind the real openai client."""

import pytest

from lib.eval.settings import EvalConfig
from lib.families.lave import judge as lave
from lib.models import load_model
from lib.models.store import CallStore

from ..support.openai_server import OpenAIStub

JUDGE_TOKENS = EvalConfig.judge_max_new_tokens  # stage 06's default


def test_prompt_is_built_as_the_reference_builds_it():
    text = lave.render_prompt("Is the cat asleep?", ["no", "no", "yes"], "no")
    for phrase in (
        "scale of 1-3",
        "Give the rationale before rating",
        "A binary question should only be answered with 'yes' or 'no', otherwise the candidate answer is "
        "incorrect (rating=1).",
    ):
        assert phrase in text
    assert (
        "Is the door open?" in text and "What color is the bus?" not in text
    )  # the binary demonstrations
    assert text.count("So rating=") == 8 and text.count("Question: '") == 9
    assert text.endswith(
        "Question: 'Is the cat asleep?'\nReference answers: 'no', 'no', 'yes'\nCandidate answer: 'no'\nOutput:"
    )
    open_q = lave.render_prompt("What animal?", ["cat"], "a cat")
    assert "What color is the bus?" in open_q and "Is the door open?" not in open_q


def test_binary_questions_are_told_by_the_most_common_raw_reference():
    assert lave.is_yes_no(["yes"] * 6 + ["2"] * 4)
    assert not lave.is_yes_no(["2"] * 6 + ["yes"] * 4)
    assert lave.is_yes_no(["No."])


def test_rare_references_are_filtered_as_the_reference_does():
    assert (
        lave.filter_references(["red"] * 8 + ["maroon"] * 2) == ["red"] * 8
    )  # 2/8 <= 0.25: dropped
    assert (
        lave.filter_references(["red"] * 6 + ["maroon"] * 2) == ["red"] * 6 + ["maroon"] * 2
    )  # duplicates kept
    assert lave.filter_references(["a", "b", "c"]) == ["a", "b", "c"]
    assert (
        lave.format_references(["red, dark", "blue"]) == "'blue', 'red, dark'"
    )  # a comma stays inside its answer


@pytest.mark.parametrize(
    "text, rating",
    [
        ("The answer is right. So rating=3", 3),
        ("Wrong animal.", 2),  # no rating at the end: the reference's fallback
        ("Rating: 3. On reflection, Rating: 1", 1),
        ("", 2),
    ],
)
def test_reference_reading_takes_the_last_character(text, rating):
    assert lave.reference_rating(text) == rating


@pytest.mark.parametrize(
    "text, rating",
    [
        ("The candidate matches the references. Rating: 3", 3),
        ("It is vague. rating=2", 2),
        ("Wrong animal. 1", 1),
        ("Rating: 3. On reflection, Rating: 1", None),  # two ratings: invalid, not averaged
        ("I cannot tell.", None),
        ("", None),
    ],
)
def test_rating_parser_never_guesses(text, rating):
    assert lave.read_rating(text)[0] == rating
    assert lave.score(rating) == (None if rating is None else (rating - 1) / 2)


def test_judge_through_the_openai_backend_caches_and_keeps_rationales(tmp_path, monkeypatch):
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-test")
    with OpenAIStub() as server:
        judge = load_model(
            {
                "backend": "openai",
                "name": "judge",
                "base_url": server.url,
                "api_key_env": "VQALAB_TEST_KEY",
            }
        )
        store = CallStore(tmp_path / "calls.sqlite")
        cands = [
            "[[reply:Same animal as the references. Rating: 3]]",
            "[[reply:Hmm, maybe.]]",
            "[[reply:Rating: 2 or Rating: 1]]",
        ]
        js = lave.judge(
            judge,
            ["What animal?"] * 3,
            [["cat"]] * 3,
            cands,
            JUDGE_TOKENS,
            store=store,
            item_ids=["a", "b", "c"],
            answer_model="vlm",
            progress=False,
        )
        assert (
            [j.rating for j in js][0] == 3
            and js[0].score == 1.0
            and js[0].rationale == "Same animal as the references."
        )
        # no rating: the judge is asked once more under a constraint (the stub picks the first allowed, "1")
        assert (
            js[1].rating == 1
            and js[1].meta["method"] == "json_schema"
            and js[1].raw == "Hmm, maybe."
        )
        # beside it, the reference implementation's reading: no rating at the end of the text is a 2
        assert js[0].meta["score_reference"] == 1.0 and js[1].meta["score_reference"] == 0.5
        calls = len(server.bodies)
        again = lave.judge(
            judge,
            ["What animal?"] * 3,
            [["cat"]] * 3,
            cands,
            JUDGE_TOKENS,
            store=store,
            progress=False,
        )
        assert len(server.bodies) == calls and [j.rating for j in again] == [j.rating for j in js]
        strict = lave.judge(
            judge,
            ["What animal?"],
            [["cat"]],
            [cands[2]],
            JUDGE_TOKENS,
            store=store,
            constrain=False,
            progress=False,
        )
        assert strict[0].rating is None and not strict[0].valid and strict[0].score is None
