import pytest

from lib.core.schema import Item, Judgement, Prediction


def test_item_round_trips_through_dict():
    item = Item(
        id="q1",
        task="mcq",
        question="Which?",
        images=["images/a.png"],
        options=["a", "b", "c"],
        answer=[2],
        meta={"specific_type": "Intent Completion"},
    )
    assert Item.from_dict(item.to_dict()) == item


@pytest.mark.parametrize("answer", [[3], [-1], [True], 1])
def test_item_rejects_answers_that_are_not_option_indices(answer):
    with pytest.raises((ValueError, TypeError), match="q1"):
        Item(id="q1", task="mcq", question="?", options=["a", "b"], answer=answer)


def test_open_item_needs_reference_texts():
    assert (
        Item(id="o", task="vqa.open", question="?", answer=["Paris", "paris, France"]).answer[0]
        == "Paris"
    )
    with pytest.raises(ValueError, match="reference texts"):
        Item(id="o", task="vqa.open", question="?", answer=[1])


def test_unknown_field_is_named():
    with pytest.raises(ValueError, match="colour"):
        Item.from_dict({"id": "x", "task": "t", "question": "?", "colour": "red"})


def test_prediction_and_judgement_round_trip():
    p = Prediction(
        item_id="q1", model="m", task="mcq", raw="B.", parsed=1, method="parse:letter", correct=True
    )
    j = Judgement(
        item_id="q1", model="m", judge="smollm2", rating=None, score=None, raw="hmm", valid=False
    )
    assert Prediction.from_dict(p.to_dict()) == p
    assert Judgement.from_dict(j.to_dict()) == j


def test_a_prediction_written_with_its_dataset_in_meta_is_read_with_the_field():
    """Before ``dataset`` was a field it sat in ``meta``: such a predictions line reads the same."""
    old = {
        "item_id": "q1",
        "model": "m",
        "task": "vqa.open",
        "raw": "blue",
        "meta": {"dataset": "a", "reasoning": "r"},
    }
    p = Prediction.from_dict(old)
    assert (p.dataset, p.meta) == ("a", {"reasoning": "r"})
    assert Prediction.from_dict(p.to_dict()) == p
