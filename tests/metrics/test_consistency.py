"""The Scrapbook protocol: matching per form, error categories, precedence, aggregation, gating.

The group rules are read twice on each case: by the tests' frame functions
(tests/scrapbook/reference_consistency.py), whose results the cases state, and by lib's rules on
codes (:mod:`lib.families.scrapbook.coded`), held equal to them (:func:`_lib_reads_it_alike`)."""

import numpy as np
import pandas as pd
import pytest

from lib.families.scrapbook import coded, consistency
from lib.families.scrapbook.task import Codes
from lib.tasks import Scoring
from tests.scrapbook import reference_consistency as frame

YN = ("yes", "no", "not applicable")
REGIONS = ("top left", "center", "center left", "not applicable")
COLORS = ("gray", "red", "not applicable")

CODED = ("image", "query", "paraphrase", "type", "form", "level", "subgroup", "concepts", "answer")
DEFAULTS = {"paraphrase": 0, "answer": None}


def coded_answers(scored: pd.DataFrame) -> coded.CodedAnswers:
    """A frame of one model's answers (read: ``category`` and ``answer``, or only ``correct``) as
    Scrapbook's scorer codes them for lib's group rules."""
    assert scored["model"].nunique() == 1
    n, c = len(scored), {k: Codes() for k in CODED}
    for k, codes in c.items():
        for v in scored[k] if k in scored else [DEFAULTS[k]] * n:
            codes.add(tuple(v) if k == "concepts" else v)
    images = {v: i for i, v in enumerate(c["image"].values)}
    parents = scored["parent"] if "parent" in scored else [None] * n
    categories = (
        scored["category"]
        if "category" in scored
        else np.where(scored["correct"], consistency.CORRECT, consistency.WRONG)
    )
    return coded.CodedAnswers(
        model=scored["model"].iloc[0],
        parent=np.array(
            [coded.NO_PARENT if v is None else images.get(v, coded.UNEVALUATED) for v in parents]
        ),
        **{k: c[k].array() for k in ("image", "query", "paraphrase", "type", "form", "concepts")},
        types=c["type"].values,
        forms=c["form"].values,
        level=c["level"].numbers(),
        subgroup=c["subgroup"].numbers(),
        concept_values=c["concepts"].values,
        absurd=scored["absurd"].to_numpy(dtype=bool),
        category=np.array([coded.CATEGORY_NAMES.index(x) for x in categories], dtype=np.int8),
        answer=c["answer"].array(),
        valid=np.ones(n, dtype=bool),
        truncated=np.zeros(n, dtype=bool),
    )


def _names(codes) -> list[str]:
    return [coded.CATEGORY_NAMES[k] for k in codes]


def _lib_reads_it_alike(scored: pd.DataFrame) -> None:
    """lib's group rules on codes give what the frame functions give on ``scored``: each
    answer's strict category, each question's categories and correctness, each query's
    consistency, the levels and the errors."""
    a, qs = coded_answers(scored), frame.questions(scored)
    strict, got = coded.strict_categories(a), coded.questions(a)
    assert _names(strict) == scored["category_strict"].tolist()
    for col in ("correct_all", "correct_all_strict"):
        assert got[col].tolist() == qs[col].tolist(), col
    for col in ("category", "category_strict"):
        assert _names(got[col]) == qs[col].tolist(), col
    assert coded.queries(a)["consistent"].tolist() == frame.queries(scored)["consistent"].tolist()
    errors = frame.errors_frame(frame.error_table(scored, qs), frame.overall_table(scored, qs))
    pd.testing.assert_frame_equal(coded.errors(a, strict, got), errors)
    pd.testing.assert_frame_equal(coded.levels(a), frame.levels(scored))


@pytest.mark.parametrize(
    "output, expected, form, category",
    [
        ("yes", "yes", "original", consistency.CORRECT),
        (
            "Yes, there is one.",
            "yes",
            "original",
            consistency.CORRECT,
        ),  # contained: enough for original/direction
        (
            "Yes, there is one.",
            "yes",
            "condition",
            consistency.UNEXPECTED,
        ),  # exact forms need the answer alone
        (
            "Yes",
            "yes",
            "enumerated",
            consistency.CORRECT,
        ),  # the paper's exact match: case aside, the raw answer
        ("Yes.", "yes", "enumerated", consistency.UNEXPECTED),
        (
            " squares1 No 2 pentagonsON",
            "no",
            "enumerated",
            consistency.UNEXPECTED,
        ),  # never read as "no"
        ("upper left", "top left", "original", consistency.CORRECT),  # the generator's own synonyms
        ("upper left", "top left", "condition", consistency.CORRECT),
        (
            "upper left",
            "top left",
            "enumerated",
            consistency.UNEXPECTED,
        ),  # enumerated: one of the listed words
        ("it is in the middle", "center", "direction", consistency.CORRECT),
        ("on the left half", "center left", "original", consistency.CORRECT),
        (
            "top left",
            "center left",
            "original",
            consistency.WRONG,
        ),  # "left" inside "top left" is not a second answer
        ("yes and no", "yes", "original", consistency.MULTIPLE),
        ("no", "yes", "direction", consistency.WRONG),
        ("banana", "yes", "original", consistency.UNEXPECTED),
        ("not applicable", "<unk>", "enumerated", consistency.CORRECT),
        (
            "it is at the center left",
            "center left",
            "original",
            consistency.CORRECT,
        ),  # longest match: not also "center"
        ("center", "center left", "condition", consistency.WRONG),
        ("grey", "gray", "original", consistency.CORRECT),
        ("", "yes", "original", consistency.UNEXPECTED),
    ],
)
def test_categories(output, expected, form, category):
    space = REGIONS if expected in REGIONS else COLORS if expected in COLORS else YN
    assert consistency.categorize(output, expected, form, space) == category


def test_counting_reads_number_words_and_any_number():
    assert (
        consistency.categorize(
            "there are two circles", "2", "original", ("0", "1", "2"), counting=True
        )
        == consistency.CORRECT
    )
    assert (
        consistency.categorize("7", "2", "condition", ("0", "1", "2"), counting=True)
        == consistency.WRONG
    )
    assert (
        consistency.categorize("2 or 3", "2", "original", ("0", "1", "2", "3"), counting=True)
        == consistency.MULTIPLE
    )


def _rows(answers):
    """answers: {(image, form): output} for one presence query; image b's parent is a."""
    rows = []
    for (image, form), out in answers.items():
        rows.append(
            {
                "model": "m",
                "item_id": f"{image}-{form}",
                "image": image,
                "parent": {"a": None, "b": "a"}[image],
                "query": "q1",
                "type": "presence",
                "form": form,
                "level": 1,
                "concepts": ("shape:circle",),
                "subgroup": 1,
                "absurd": False,
                "expected": "yes",
                "output": out,
                "space": YN,
            }
        )
    return pd.DataFrame(rows)


def test_precedence_invalidates_a_correct_answer_wrong_on_the_simpler_image():
    df = frame.score_versions(_rows({("a", "original"): "no", ("b", "original"): "yes"}))
    b = df[df["image"] == "b"].iloc[0]
    assert (
        b["correct"] and not b["correct_strict"] and b["category_strict"] == consistency.INVALIDATED
    )
    _lib_reads_it_alike(df)
    df = frame.score_versions(_rows({("a", "original"): "yes", ("b", "original"): "yes"}))
    assert df["correct_strict"].all()
    _lib_reads_it_alike(df)


def test_aggregated_categories_and_consistency():
    forms = ("original", "condition", "direction", "enumerated")
    agree = frame.score_versions(_rows({("a", f): "yes" for f in forms}))
    q = frame.questions(agree).iloc[0]
    assert q["correct_all"] and q["consistency"] == 1.0 and q["category"] == consistency.CORRECT
    mixed = frame.score_versions(
        _rows(
            {
                ("a", "original"): "yes",
                ("a", "condition"): "no",
                ("a", "direction"): "yes",
                ("a", "enumerated"): "yes",
            }
        )
    )
    q = frame.questions(mixed).iloc[0]
    assert q["category"] == consistency.ANSWER_DISAGREEMENT and q["consistency"] == 0.75
    errs = frame.score_versions(_rows({("a", "original"): "banana", ("a", "condition"): "no"}))
    assert frame.questions(errs).iloc[0]["category"] == consistency.ERROR_DISAGREEMENT
    table = frame.error_table(errs, frame.questions(errs))
    agg = table[(table["unit"] == "aggregated") & (table["filter"] == "all")].set_index("category")[
        "count"
    ]
    assert agg[consistency.ERROR_DISAGREEMENT] == 1 and agg["total"] == 1
    for scored in (agree, mixed, errs):
        _lib_reads_it_alike(scored)


def test_words_mode_is_the_lenient_reading_one_parameter_away():
    assert (
        consistency.categorize("Yes.", "yes", "enumerated", YN, exact="words")
        == consistency.CORRECT
    )
    assert (
        consistency.categorize(
            "two", "2", "condition", ("0", "1", "2"), counting=True, exact="words"
        )
        == consistency.CORRECT
    )
    assert (
        consistency.categorize("two", "2", "condition", ("0", "1", "2"), counting=True)
        == consistency.UNEXPECTED
    )  # not the digit
    with pytest.raises(ValueError, match="exact"):
        consistency.categorize("yes", "yes", "enumerated", YN, exact="loose")


def _colour_rows(outputs, paraphrase=0, image="a"):
    return [
        {
            "model": "m",
            "item_id": f"{image}-{paraphrase}-{f}",
            "image": image,
            "parent": None,
            "query": "q",
            "paraphrase": paraphrase,
            "type": "recognition",
            "form": f,
            "level": 2,
            "concepts": ("shape:circle",),
            "subgroup": 1,
            "absurd": False,
            "expected": "green",
            "output": o,
            "space": ("green", "red", "blue", "yellow", "white"),
        }
        for f, o in outputs.items()
    ]


def test_aggregated_categories_are_decided_from_the_answers():
    forms = ("original", "condition", "direction", "enumerated")
    four_colours = frame.score_versions(
        pd.DataFrame(_colour_rows(dict(zip(forms, ("red", "blue", "yellow", "white")))))
    )
    assert frame.questions(four_colours).iloc[0]["category"] == consistency.ANSWER_DISAGREEMENT
    same = frame.score_versions(pd.DataFrame(_colour_rows({f: "red" for f in forms})))
    assert frame.questions(same).iloc[0]["category"] == consistency.WRONG
    _lib_reads_it_alike(four_colours)
    _lib_reads_it_alike(same)


def test_a_question_is_one_paraphrase_with_its_four_forms():
    forms = ("original", "condition", "direction", "enumerated")
    rows = (
        _colour_rows({f: "green" for f in forms}, 0)
        + _colour_rows({f: "green" for f in forms}, 1)
        + _colour_rows({f: "green" for f in forms[:3]} | {"enumerated": "red"}, 2)
    )
    scored = frame.score_versions(pd.DataFrame(rows))
    q = frame.questions(scored)
    assert len(q) == 3 and (q["versions"] == 4).all()
    _lib_reads_it_alike(scored)
    assert q["correct_all"].tolist() == [True, True, False] and q["consistency"].tolist() == [
        1.0,
        1.0,
        0.75,
    ]


def test_corrects_minus_corrects_star_is_invalidated_by_construction():
    """Table 8 - Tables 9/10/15: 7,491 - 5,149 = 2,342 holds because invalidation is decided per question."""
    forms = ("original", "condition", "direction", "enumerated")
    rows = []
    for image, parent, outs in (
        ("a", None, ("no",) * 4),
        ("b", "a", ("yes",) * 4),
        ("c", "b", ("yes",) * 4),
        ("d", None, ("yes",) * 4),
        ("e", "d", ("yes", "no", "yes", "yes")),
    ):
        for p in (0, 1):
            rows += [
                {
                    "model": "m",
                    "item_id": f"{image}{p}{f}",
                    "image": image,
                    "parent": parent,
                    "query": "q",
                    "paraphrase": p,
                    "type": "presence",
                    "form": f,
                    "level": 1,
                    "concepts": ("shape:circle",),
                    "subgroup": 1,
                    "absurd": False,
                    "expected": "yes",
                    "output": o,
                    "space": YN,
                }
                for f, o in zip(forms, outs)
            ]
    scored = frame.score_versions(pd.DataFrame(rows))
    qs = frame.questions(scored)
    overall = frame.overall_table(scored, qs).set_index("filter")
    errors = frame.error_table(scored, qs)
    agg = errors[(errors["unit"] == "aggregated") & (errors["filter"] == "all")].set_index(
        "category"
    )["count"]
    corrects, corrects_star = overall.loc["full", "correct"], overall.loc["full*", "correct"]
    assert (corrects, corrects_star) == (6, 2)  # b and c (4 questions) rest on a wrong answer on a
    assert corrects - corrects_star == agg[consistency.INVALIDATED] == 4
    assert agg["total"] == len(qs) - corrects_star
    _lib_reads_it_alike(scored)


def _gating_rows(concept, answers, level=1, extra=()):
    """Presence and counting questions about ``concept``: present (subgroup 1) and absent (2)."""
    rows = []
    for typ, present, absent in (("presence", "yes", "no"), ("counting", "1", "0")):
        for sub, expected in ((1, present), (2, absent)):
            for i in range(5):
                out = answers(typ, expected)
                rows.append(
                    {
                        "model": "m",
                        "image": f"i{i}",
                        "query": f"{concept}{extra}-{typ}-{sub}",
                        "type": typ,
                        "form": "original",
                        "level": level,
                        "concepts": (concept, *extra),
                        "absurd": False,
                        "correct": out == expected,
                        "subgroup": sub,
                    }
                )
    return rows


def test_level_gating_needs_present_and_absent_questions_and_passes_nothing_for_always_no():
    right = lambda typ, expected: expected
    always_no = lambda typ, expected: "no" if typ == "presence" else "0"
    rows = _gating_rows("shape:circle", right) + _gating_rows("shape:square", always_no)
    rows += [
        r for r in _gating_rows("color:white", right) if r["subgroup"] == 2
    ]  # never present: not enabled
    rows += _gating_rows("shape:circle", right, 2, ("region:center",)) + _gating_rows(
        "shape:square", right, 2, ("region:center",)
    )
    rows += _gating_rows("shape:triangle", right, 1) + _gating_rows(
        "shape:pentagon", right, 3, ("relation:left", "reference_shape:square")
    )
    lv = frame.levels(pd.DataFrame(rows))
    pd.testing.assert_frame_equal(coded.levels(coded_answers(pd.DataFrame(rows))), lv)
    one = lv[(lv["level"] == 1) & (lv["form"] == "all")].groupby("concept")["passed"].all()
    assert one["shape:circle"] and one["shape:triangle"]
    assert not one["shape:square"] and not one["color:white"]
    two = lv[lv["level"] == 2]
    assert set(two["concepts"]) == {
        "shape:circle|region:center"
    }  # the square never reaches level 2
    assert two["concept"].eq("region:center").all() and two["passed"].all()
    assert lv[
        lv["level"] == 3
    ].empty  # the reference square failed level 1: its relative questions are gated out
    no_model = frame.levels(pd.DataFrame(_gating_rows("shape:circle", always_no)))
    pd.testing.assert_frame_equal(
        coded.levels(coded_answers(pd.DataFrame(_gating_rows("shape:circle", always_no)))),
        no_model,
    )
    assert not no_model["passed"].any()  # right on every absent question, still no concept passes


FORMS = ("original", "condition", "direction", "enumerated")


def _paraphrased(wrong: dict[str, int]) -> pd.DataFrame:
    """Two paraphrases of one presence query in four forms on each image ``wrong`` names, the first
    ``wrong[image]`` of its eight askings answered "no" (the rest "yes", as expected)."""
    frames = []
    for image, n_wrong in wrong.items():
        df = _rows({("a", f): "yes" for f in FORMS}).assign(image=image, parent=None)
        df = pd.concat([df.assign(paraphrase=0), df.assign(paraphrase=1)], ignore_index=True)
        df.loc[: n_wrong - 1, "output"] = "no"
        frames.append(df.assign(item_id=df["image"] + df["item_id"] + df["paraphrase"].astype(str)))
    return pd.concat(frames, ignore_index=True)


def test_consistency_pools_a_querys_paraphrases_and_forms_at_the_papers_threshold():
    """Section 7: "an accurate response at least 80% of the time for the same question posed in
    different forms", over its iterations. Two paraphrases x four forms are eight askings: seven
    right (0.875) is consistent though one paraphrase is not right in every form; six (0.75) is
    not; over one paraphrase's four forms 0.8 needs all four."""
    scored = frame.score_versions(_paraphrased({"p": 0, "q": 1, "r": 2}))
    qy = frame.queries(scored).set_index("image")
    assert qy["consistency"].tolist() == [1.0, 0.875, 0.75]
    assert qy["consistent"].tolist() == [True, True, False]
    qs = frame.questions(scored)
    assert qs.groupby("image")["correct_all"].mean().tolist() == [1.0, 0.5, 0.5]
    one = frame.score_versions(_rows({("a", f): "no" if f == "original" else "yes" for f in FORMS}))
    assert (
        not frame.queries(one)["consistent"].item()
        and not frame.questions(one)["correct_all"].item()
    )
    _lib_reads_it_alike(scored)
    _lib_reads_it_alike(one)


def test_consistent_rate_is_over_queries_and_differs_from_all_forms_accuracy():
    """The table rows: ``consistent_rate`` over queries (p and q of p, q, r: 2 of 3),
    ``accuracy_all_forms`` over questions (both of p's paraphrases, and q's and r's second: 4 of
    6), as the frame functions and lib's rules on codes make them."""
    scored = frame.score_versions(_paraphrased({"p": 0, "q": 1, "r": 2}))
    flags = np.ones(len(scored), bool), np.zeros(len(scored), bool)
    rows = pd.DataFrame(frame.scrapbook_tables(scored, *flags, Scoring(n_resamples=50)).rows)
    tables, _ = coded.tables(coded_answers(scored), Scoring(n_resamples=50))
    pd.testing.assert_frame_equal(pd.DataFrame(tables.rows), rows)
    at = rows.set_index(["subset", "metric"])
    for subset in ("non-absurd", "full"):
        assert at.loc[(subset, "consistent_rate"), "value"] == pytest.approx(2 / 3)
        assert at.loc[(subset, "consistent_rate"), "n"] == 3
        assert at.loc[(subset, "accuracy_all_forms"), "value"] == pytest.approx(4 / 6)
        assert at.loc[(subset, "accuracy_all_forms"), "n"] == 6
