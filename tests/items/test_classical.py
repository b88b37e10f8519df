"""Classical item statistics and flags: the corrected point-biserial as its definition says, each
flag on the item it describes, and planted wrong keys found among clean items."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lib.items import classical
from tests.items import simulated


def test_the_corrected_point_biserial_leaves_the_item_out_of_the_total():
    rng = np.random.default_rng(3)
    matrix = (rng.random((12, 9)) < 0.6).astype(float)
    matrix[2, 4] = np.nan  # an unanswered item counts in neither side
    found = classical.corrected_point_biserial(matrix)
    for i in range(len(matrix)):
        answered = ~np.isnan(matrix[i])
        rest = [
            np.nanmean(np.delete(matrix[:, j], i)) for j in range(matrix.shape[1]) if answered[j]
        ]
        expected = np.corrcoef(matrix[i, answered], rest)[0, 1]
        assert np.isclose(found[i], expected, equal_nan=True), i


def _bank(answers: dict[str, list[str]], key: dict[str, str]) -> pd.DataFrame:
    """A bank of one dataset: per item, each respondent's answer, right when it is the key."""
    rows = [
        {
            "dataset": "d",
            "digest": "v",
            "item_id": item,
            "task": "mcq",
            "run": "r",
            "model": f"m{j}",
            "style": "zero_shot",
            "correct": given == key[item],
            "valid": True,
            "answer": f'"{given}"',
            "source": "",
        }
        for item, given_all in answers.items()
        for j, given in enumerate(given_all)
    ]
    return pd.DataFrame(rows).astype({"correct": "boolean"})


def test_each_flag_marks_the_item_it_describes():
    answers = {
        "easy": list("AAAAA"),
        "impossible": list("BCDBC"),
        "wrong_key": list("BBBBA"),  # four of five give B; the key says A
        "fine": list("AABCA"),
    }
    stats = classical.item_statistics(_bank(answers, dict.fromkeys(answers, "A")))
    flagged = {f: set(stats.loc[stats[f], "item_id"]) for f in classical.FLAGS}
    assert flagged == {
        "saturated": {"easy"},
        "never_right": {"impossible"},
        "negative_discrimination": set(),  # five respondents say nothing about a correlation
        "agreed_wrong": {"wrong_key"},
    }
    wrong = stats.set_index("item_id").loc["wrong_key"]
    assert wrong["wrong_answer"] == '"B"' and wrong["wrong_share"] == 0.8 and wrong["p"] == 0.2


def test_too_few_respondents_raise_no_flag():
    answers = {"easy": list("AAA"), "wrong_key": list("BBB")}
    stats = classical.item_statistics(_bank(answers, dict.fromkeys(answers, "A")))
    assert not stats[list(classical.FLAGS)].any().any()


def test_planted_wrong_keys_are_flagged_and_clean_items_mostly_not():
    """Ten items the respondents can answer (true difficulty below -0.5: about two thirds know
    them) keyed on a wrong option: those who know them give one "wrong" answer. A wrong key on
    a question nobody can answer leaves no trace in the answers, so none is planted there."""
    items, _ = simulated.truth(40, 200, seed=0)
    planted = list(items.index[items["b"] < -0.5][:10])
    table, _, _ = simulated.bank(40, 200, seed=0, wrong_keys=planted)
    stats = classical.item_statistics(table).set_index("item_id")
    flagged = stats["negative_discrimination"] | stats["agreed_wrong"]
    assert flagged[planted].all()
    assert flagged.drop(planted).sum() <= 2


def test_a_reversed_key_of_a_yes_no_question_shows_as_negative_discrimination():
    """On a two-way question a wrong key turns every right answer wrong and every wrong one right:
    the strong respondents fail it. Ten of them among 190 clean items (40 respondents)."""
    matrix, items, _ = simulated.matrix(40, 200, seed=0)
    planted = items.index[items["b"].abs() < 1][:10]
    matrix.loc[planted] = 1 - matrix.loc[planted]
    r = pd.Series(classical.corrected_point_biserial(matrix.to_numpy()), index=matrix.index)
    negative = r < classical.NEGATIVE_DISCRIMINATION
    assert negative[planted].sum() >= 8 and negative.drop(planted).sum() <= 2


def test_flag_counts_say_per_dataset_how_many_items_carry_each_flag():
    table, _, _ = simulated.bank(12, 30, seed=1)
    other, _, _ = simulated.bank(12, 20, seed=2, dataset="e")
    stats = classical.item_statistics(pd.concat([table, other]))
    counts = classical.flag_counts(stats).set_index("dataset")
    assert counts.loc["sim", "items"] == 30 and counts.loc["e", "items"] == 20
    assert counts.loc["sim", "respondents"] == 12
    assert counts.loc["e", "never_right"] == stats.query("dataset == 'e'")["never_right"].sum()
