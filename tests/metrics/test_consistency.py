"""The Scrapbook protocol: matching per form, error categories, precedence, aggregation, gating."""

import pandas as pd
import pytest

from lib.metrics import consistency as S

YN = ("yes", "no", "not applicable")
REGIONS = ("top left", "center", "center left", "not applicable")


@pytest.mark.parametrize("output, expected, form, category", [
    ("yes", "yes", "original", S.CORRECT),
    ("Yes, there is one.", "yes", "original", S.CORRECT),  # contained: enough for original/direction
    ("Yes, there is one.", "yes", "condition", S.UNEXPECTED),  # exact forms need the answer alone
    ("Yes.", "yes", "enumerated", S.CORRECT),
    ("yes and no", "yes", "original", S.MULTIPLE),
    ("no", "yes", "direction", S.WRONG),
    ("banana", "yes", "original", S.UNEXPECTED),
    ("not applicable", "<unk>", "enumerated", S.CORRECT),
    ("it is at the center left", "center left", "original", S.CORRECT),  # longest match: not also "center"
    ("center", "center left", "condition", S.WRONG),
    ("", "yes", "original", S.UNEXPECTED),
])
def test_categories(output, expected, form, category):
    space = REGIONS if "center" in expected else YN
    assert S.categorize(output, expected, form, space) == category


def test_counting_reads_number_words_and_any_number():
    assert S.categorize("there are two circles", "2", "original", ("0", "1", "2"), counting=True) == S.CORRECT
    assert S.categorize("7", "2", "condition", ("0", "1", "2"), counting=True) == S.WRONG
    assert S.categorize("2 or 3", "2", "original", ("0", "1", "2", "3"), counting=True) == S.MULTIPLE


def _rows(answers):
    """answers: {(image, form): output} for one presence query; image b's parent is a."""
    rows = []
    for (image, form), out in answers.items():
        rows.append({"model": "m", "item_id": f"{image}-{form}", "image": image, "parent": {"a": None, "b": "a"}[image],
                     "query": "q1", "type": "presence", "form": form, "level": 1, "concepts": ("shape:circle",),
                     "subgroup": 1, "absurd": False, "expected": "yes", "output": out, "space": YN})
    return pd.DataFrame(rows)


def test_precedence_invalidates_a_correct_answer_wrong_on_the_simpler_image():
    df = S.score_versions(_rows({("a", "original"): "no", ("b", "original"): "yes"}))
    b = df[df["image"] == "b"].iloc[0]
    assert b["correct"] and not b["correct_strict"] and b["category_strict"] == S.INVALIDATED
    df = S.score_versions(_rows({("a", "original"): "yes", ("b", "original"): "yes"}))
    assert df["correct_strict"].all()


def test_aggregated_categories_and_consistency():
    forms = ("original", "condition", "direction", "enumerated")
    agree = S.score_versions(_rows({("a", f): "yes" for f in forms}))
    q = S.questions(agree).iloc[0]
    assert q["correct_all"] and q["consistency"] == 1.0 and q["consistent"] and q["category"] == S.CORRECT
    mixed = S.score_versions(_rows({("a", "original"): "yes", ("a", "condition"): "no", ("a", "direction"): "yes",
                                    ("a", "enumerated"): "yes"}))
    q = S.questions(mixed).iloc[0]
    assert q["category"] == S.ANSWER_DISAGREEMENT and q["consistency"] == 0.75 and not q["consistent"]
    errs = S.score_versions(_rows({("a", "original"): "banana", ("a", "condition"): "no"}))
    assert S.questions(errs).iloc[0]["category"] == S.ERROR_DISAGREEMENT
    table = S.error_table(errs, S.questions(errs))
    agg = table[(table["unit"] == "aggregated") & (table["filter"] == "all")].set_index("category")["count"]
    assert agg[S.ERROR_DISAGREEMENT] == 1 and agg["total"] == 1


def test_level_gating_evaluates_level_2_only_with_passed_concepts():
    rows = []
    for concept, ok in (("shape:circle", True), ("shape:square", False)):
        for i in range(5):
            rows.append({"model": "m", "image": f"i{i}", "query": f"{concept}-1", "type": "presence", "form": "original",
                         "level": 1, "concepts": (concept,), "absurd": False, "correct": ok, "subgroup": 1})
            rows.append({"model": "m", "image": f"i{i}", "query": f"{concept}-2", "type": "presence", "form": "original",
                         "level": 2, "concepts": (concept, "region:center"), "absurd": False, "correct": True, "subgroup": 1})
    lv = S.levels(pd.DataFrame(rows))
    one = lv[(lv["level"] == 1) & (lv["form"] == "all")].set_index("concept")["passed"]
    assert one["shape:circle"] and not one["shape:square"]
    two = lv[lv["level"] == 2]
    assert set(two["concepts"]) == {"shape:circle|region:center"}  # the square never reaches level 2
    assert two["concept"].eq("region:center").all() and two["passed"].all()
