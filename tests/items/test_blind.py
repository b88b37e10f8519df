"""The blind reader: planted text-only-solvable questions found, folds kept by image, the
rule-based baseline beside it, open answers read where they form a closed set, and the MemeQA
release answered far above the rule-based tells without its images."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lib.core.schema import Item
from lib.items.blind import blind_reader, blind_table, rule_pick
from lib.items.text_features import image_folds
from lib.metrics.shortcuts import audit

from ..support.data import SHARED_DATA

WORDS = [
    f"{a}{b}" for a in ("bra", "cle", "dro", "fen", "gal", "hor", "jun", "kel") for b in "aeiou"
]
CUE = "sure"  # the give-away word planted in the right option: as long as every other word


def _mcq(
    n: int, image: str, options: list[str], answer: int, qtype: str = "t", question: str = ""
) -> Item:
    return Item(
        id=f"q{n}",
        task="mcq",
        question=question or f"What does picture {image} show?",
        images=[f"images/{image}.png"],
        options=options,
        answer=[answer],
        meta={"general_type": "single", "specific_type": qtype},
    )


def _options(rng: random.Random, cue: bool, answer: int) -> list[str]:
    """Four options of two random words each (no tell singles one out by design); with ``cue`` the
    right one says the give-away word instead of its second word."""
    options = [f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(4)]
    if cue:
        options[answer] = f"{options[answer].split()[0]} {CUE}"
    return options


def planted(n_images: int = 150, seed: int = 0) -> tuple[list[Item], set[str]]:
    """Two questions per image; half the images' questions mark the right option by a word."""
    rng = random.Random(seed)
    items, cued = [], set()
    for g in range(n_images):
        for q in range(2):
            answer = rng.randrange(4)
            items.append(_mcq(2 * g + q, f"img{g}", _options(rng, g % 2 == 0, answer), answer))
            if g % 2 == 0:
                cued.add(items[-1].id)
    return items, cued


def test_planted_give_away_options_are_answered_blind_and_the_rest_sit_at_chance():
    items, cued = planted()
    scored = blind_reader(items, seed=1).set_index("item_id")
    hit, rest = scored.loc[sorted(cued)], scored.drop(index=sorted(cued))
    assert hit["p_blind"].mean() > 0.8 and hit["correct"].mean() > 0.95
    assert abs(rest["p_blind"].mean() - 0.25) < 0.07 and rest["correct"].mean() < 0.4
    # the tells see nothing planted: the rule-based baseline stays near chance on both halves
    assert hit["rule_correct"].mean() < 0.45 and rest["rule_correct"].mean() < 0.45


def test_questions_about_one_image_never_straddle_a_fold():
    """Every image's questions share their right option (two words drawn as every distractor's
    are): a reader that saw an image's other questions in training would answer them; held out by
    image it cannot."""
    rng = random.Random(3)
    items = []
    for g in range(120):
        own = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
        for q in range(3):
            options = [f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(3)]
            answer = rng.randrange(4)
            options.insert(answer, own)
            items.append(_mcq(3 * g + q, f"img{g}", options, answer))
    scored = blind_reader(items, folds=4)
    assert scored["correct"].mean() < 0.4
    folds = image_folds([it.images[0] for it in items], 4, 0)
    tested = np.concatenate([test for _, test in folds])
    assert sorted(tested) == list(range(len(items)))
    for train, test in folds:
        assert not {items[i].images[0] for i in train} & {items[i].images[0] for i in test}


def test_the_rule_based_column_is_the_shortcut_audits_blind_baseline():
    rng = random.Random(5)
    items = []
    for n in range(200):
        options = [rng.choice(WORDS) * rng.randint(1, 3) for _ in range(4)]
        options[n % 4] = options[n % 4].capitalize() + ("." if n % 3 == 0 else "")
        items.append(_mcq(n, f"img{n // 2}", options, rng.randrange(4), qtype=f"t{n % 2}"))
    scored = blind_reader(items)
    table = blind_table(scored).set_index("type")
    rows = audit(items)
    for qtype, rate in rows[rows["tell"] == "blind baseline"].set_index("type")["rate"].items():
        assert table.loc[qtype, "rule_based"] == pytest.approx(rate)
        assert table.loc[qtype, "rule_low"] <= rate <= table.loc[qtype, "rule_high"]
    assert scored["rule_correct"].tolist() == [
        float(rule_pick(it.options) == it.answer[0]) for it in items
    ]


def test_the_table_gives_each_type_and_all_types_with_intervals_and_chance():
    items, _ = planted(60)
    three = _mcq(999, "img_three", ["a b", "c d", "e f"], 0, qtype="three")
    scored = blind_reader([*items, three])
    table = blind_table(scored).set_index("type")
    assert list(table.index) == ["t", "three", "all types"]
    whole = table.loc["all types"]
    assert whole["n"] == 121 and whole["images"] == 61 and whole["skipped"] == 0
    assert whole["chance"] == pytest.approx((120 * 0.25 + 1 / 3) / 121)
    assert whole["blind_low"] <= whole["blind"] <= whole["blind_high"]
    assert whole["blind"] == pytest.approx(scored["correct"].mean())


def test_multi_answer_items_and_free_text_answers_are_skipped_with_the_reason():
    items, _ = planted(20)
    multi = Item(
        id="multi",
        task="mcq",
        question="Which?",
        images=["images/m.png"],
        options=["a", "b", "c"],
        answer=[0, 2],
        meta={"general_type": "multi"},
    )
    free = [
        Item(id=f"free{n}", task="vqa", question="Describe it.", images=[f"f{n}.png"], answer=[w])
        for n, w in enumerate(WORDS)
    ]
    scored = blind_reader([*items, multi, *free]).set_index("item_id")
    assert scored.loc["multi", "reason"].startswith("multi-answer")
    assert all(
        scored.loc[f"free{n}", "reason"].startswith("open answers: 40 distinct") for n in range(40)
    )
    assert scored.loc[[it.id for it in items], "reason"].eq("").all()


def test_closed_open_answers_are_read_from_the_question_alone():
    """Yes/no questions whose wording gives the answer away (``red`` ones are yes) are answered
    blind; the others (a coin flip) are not."""
    rng = random.Random(7)
    items = []
    for n in range(240):
        telling = n % 2 == 0
        answer = "Yes." if telling else rng.choice(["yes", "no"])
        colour = "red" if telling else rng.choice(["blue", "green"])
        items.append(
            Item(
                id=f"o{n}",
                task="vqa",
                question=f"Is the {colour} {rng.choice(WORDS)} on the left?",
                images=[f"images/{n // 2}.png"],
                answer=[answer],
                meta={"type": "presence"},
            )
        )
    scored = blind_reader(items)
    assert set(scored["predicted"]) <= {"yes", "no"} and scored["n_choices"].eq(2).all()
    assert scored.iloc[::2]["correct"].mean() > 0.95 and scored.iloc[::2]["p_blind"].mean() > 0.8
    assert scored.iloc[1::2]["correct"].mean() < 0.7
    assert blind_table(scored)["format"].eq("open").all()


def test_an_unknown_reader_or_too_few_folds_is_refused():
    items, _ = planted(10)
    with pytest.raises(ValueError, match="unknown kind 'svm'; known: \\['linear', 'llm'\\]"):
        blind_reader(items, kind="svm")
    with pytest.raises(ValueError, match="folds must be at least 2"):
        blind_reader(items, folds=1)


# The MemeQA release's single-answer training questions, cross-fitted by image: measured, the
# reader answers 0.773 (None-) and 0.675 (None+) blind where the rule-based baseline answers 0.587
# and 0.286 (chance 0.259); the floors leave room for another seed's folds.
FLOORS = {
    "none-minus": (0.72, 0.12),
    "none-plus": (0.62, 0.30),
}  # blind accuracy, margin over rules


@pytest.mark.slow
@pytest.mark.needs_data("memeqa")
@pytest.mark.parametrize("split", sorted(FLOORS))
def test_memeqa_is_answered_far_above_the_rule_based_baseline_without_images(split):
    from lib.families.memeqa.importer import import_memeqa

    items = import_memeqa(SHARED_DATA / "memeqa" / split / "train.json")
    single = [it for it in items if it.meta["general_type"] == "single"]
    whole = blind_table(blind_reader(single, dataset=split)).set_index("type").loc["all types"]
    floor, margin = FLOORS[split]
    assert whole["n"] == len(single) and whole["blind"] >= floor
    assert whole["blind"] - whole["rule_based"] >= margin
    assert whole["blind_low"] > whole["rule_high"]  # apart beyond both intervals


@pytest.mark.slow
def test_the_llm_reader_prefers_the_option_the_text_model_finds_likely():
    """SmolLM2, zero-shot: common knowledge is answered without an image; an item whose options
    repeat is skipped with the reason."""
    facts = [
        ("What colour is the sky on a clear day?", ["spoon", "blue", "Tuesday", "seven"], 1),
        ("How many legs does a dog have?", ["purple", "never", "four", "cheese"], 2),
        ("Which animal says meow?", ["a cat", "a table", "a cloud", "a number"], 0),
    ]
    items = [_mcq(n, f"img{n}", o, a, question=q) for n, (q, o, a) in enumerate(facts)]
    items.append(_mcq(9, "img9", ["same", "same", "other"], 2))
    scored = blind_reader(items, kind="llm").set_index("item_id")
    assert scored.loc[["q0", "q1", "q2"], "correct"].eq(1.0).all()
    assert (scored.loc[["q0", "q1", "q2"], "p_blind"] > 0.5).all()
    assert scored.loc["q9", "reason"].startswith("empty or repeated options")
