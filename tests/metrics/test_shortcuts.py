"""The shortcut audit: the released MemeQA files' tells, and AF output that sits at chance."""

import pytest

from lib.af import engine, guards, questions
from lib.core.schema import Item
from lib.families.memeqa.importer import import_memeqa
from lib.metrics import shortcuts

from ..support.data import SHARED_DATA

MEMEQA = SHARED_DATA / "memeqa"


def _item(options, answer, qtype="Intent Identification"):
    return Item(
        id=str(options),
        task="mcq",
        question="?",
        images=["m.png"],
        options=options,
        answer=answer,
        meta={"specific_type": qtype, "general_type": "single"},
    )


def test_each_tell_fires_on_the_one_option_that_has_it():
    assert shortcuts.fires("final_stop", ["A cat.", "a dog", "a cow", "a pig"]) == 0
    assert shortcuts.fires("capitalisation", ["dogs", "Cats", "cows"]) == 1
    assert (
        shortcuts.fires("shortest", ["aa", "bbbb", "cccc"]) == 0
        and shortcuts.fires("shortest", ["aa", "bb"]) is None
    )
    table = shortcuts.audit(
        [_item(["The meme mocks cats.", "it likes dogs", "it loves cows"], [0])] * 3
    )
    stop = table[table["tell"] == "final_stop"].iloc[0]
    assert stop["fired"] == 3 and stop["rate"] == 1.0 and stop["chance"] == pytest.approx(1 / 3)


@pytest.mark.needs_data("memeqa")
def test_the_released_tells_are_found():
    table = shortcuts.audit(import_memeqa(MEMEQA / "none-minus" / "train.json")).set_index(
        ["type", "tell"]
    )
    assert (
        table.loc[("Intent Identification", "final_stop"), "rate"] > 0.95
    )  # the only unstopped option is right
    assert table.loc[("Target Identification", "capitalisation"), "rate"] > 0.95
    assert table.loc[("Intent Completion", "shortest"), "rate"] > 0.6  # chance 0.25
    blind = shortcuts.macro_blind(table.reset_index())
    assert blind["blind_macro"] > blind["chance_macro"] + 0.1


def test_af_output_sits_at_chance_for_the_tells_it_guards_against():
    """A scripted generator that writes every tell: lower-case, unstopped, much longer or shorter
    distractors for a capitalised, stopped answer. After the guards no tell points at the answer."""
    cfg = engine.AFConfig()
    items = []
    for i in range(30):
        correct = [f"The meme mocks people who wait {i} minutes for a bus."]
        written = [
            f"the meme praises patience number {i}",
            f"the meme celebrates buses {i}",
            f"the meme describes a queue of {i} people and their long and winding afternoon plans",
            f"the meme supports timetables {i}",
            "bus",
        ]
        kept, _ = guards.screen(written, correct, [], 1.0, 0.4)
        chosen = guards.pick_without_tell(
            correct, kept, questions.n_distractors({"type": "intent_id", "correct": correct}, cfg)
        )
        assert chosen is not None
        q = questions.QState(
            skeleton={
                "id": f"intent_id/{i}",
                "type": "intent_id",
                "correct": correct,
                "meta": {},
                "question": "Which intent?",
                "images": ["m.png"],
                "general_type": "single",
            }
        )
        questions.assemble(q, chosen, cfg.__class__(none_of_the_above=False), 1, "generator")
        items.append(questions.as_item(q))
    table = shortcuts.audit(items).set_index("tell")
    for tell in ("capitalisation", "final_stop"):
        assert table.loc[tell, "fired"] == 0, tell
    for tell in ("shortest", "longest"):
        assert table.loc[tell, "correct"] == 0, (
            tell
        )  # it may single out a distractor, never the answer
