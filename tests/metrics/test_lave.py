"""LAVE: the prompt, the rating parser that never guesses, and a judge behind the real openai client."""

import pytest

from lib.metrics import lave
from lib.models import load_model
from lib.store import CallStore

from ..support.openai_server import OpenAIStub


def test_prompt_has_the_lave_instructions_and_yes_no_demonstrations():
    text = lave.render_prompt("Is the cat asleep?", ["no", "no", "yes"], "no")
    for phrase in ("scale of 1-3", "Give the rationale before rating", "Provide only one rating",
                   "A binary question should only be answered with 'yes' or 'no'"):
        assert phrase in text
    assert "Is the door open?" in text and "What is the cat lying on?" not in text  # yes/no demonstrations
    assert text.endswith("Candidate answer: no\nOutput:")
    open_q = lave.render_prompt("What animal?", ["cat"], "a cat")
    assert "What is the cat lying on?" in open_q and "Is the door open?" not in open_q


def test_rare_references_are_filtered():
    assert lave.filter_references(["cat"] * 5 + ["kitten"] * 2 + ["dog"]) == ["cat", "kitten"]
    assert lave.filter_references(["a", "b", "c"]) == ["a", "b", "c"]  # nothing repeated: keep all


@pytest.mark.parametrize("text, rating", [
    ("The candidate matches the references. Rating: 3", 3),
    ("It is vague. rating=2", 2),
    ("Wrong animal. 1", 1),
    ("Rating: 3. On reflection, Rating: 1", None),  # two ratings: invalid, not averaged
    ("I cannot tell.", None),
    ("", None),
])
def test_rating_parser_never_guesses(text, rating):
    assert lave.read_rating(text)[0] == rating
    assert lave.score(rating) == (None if rating is None else (rating - 1) / 2)


def test_judge_through_the_openai_backend_caches_and_keeps_rationales(tmp_path, monkeypatch):
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-test")
    with OpenAIStub() as server:
        judge = load_model({"backend": "openai", "name": "judge", "base_url": server.url, "api_key_env": "VQALAB_TEST_KEY"})
        store = CallStore(tmp_path / "calls.sqlite")
        cands = ["[[reply:Same animal as the references. Rating: 3]]", "[[reply:Hmm, maybe.]]",
                 "[[reply:Rating: 2 or Rating: 1]]"]
        js = lave.judge(judge, ["What animal?"] * 3, [["cat"]] * 3, cands, store=store, item_ids=["a", "b", "c"],
                        answer_model="vlm", progress=False)
        assert [j.rating for j in js][0] == 3 and js[0].score == 1.0 and js[0].rationale == "Same animal as the references."
        # no rating: the judge is asked once more under a constraint (the stub picks the first allowed, "1")
        assert js[1].rating == 1 and js[1].meta["method"] == "json_schema" and js[1].raw == "Hmm, maybe."
        calls = len(server.bodies)
        again = lave.judge(judge, ["What animal?"] * 3, [["cat"]] * 3, cands, store=store, progress=False)
        assert len(server.bodies) == calls and [j.rating for j in again] == [j.rating for j in js]
        strict = lave.judge(judge, ["What animal?"], [["cat"]], [cands[2]], store=store, constrain=False, progress=False)
        assert strict[0].rating is None and not strict[0].valid and strict[0].score is None
