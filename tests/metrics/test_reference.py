"""Metrics equal to their reference implementations, case by case.

VQA accuracy: GT-Vision-Lab/VQA ``vqaEval.py``; ANLS: the DocVQA / RRC evaluation script (and its
published example); CIDEr: pycocoevalcap's own pipeline (PTBTokenizer + Cider) run directly;
METEOR: NLTK on NLTK's tokenisation. Expected values below were worked out by the reference
algorithm's rules, not by our code.
"""

import pytest

from lib.metrics import text

TEN = 10


# Values from running the official vqaEval.py (a013f00) under Python 2.7 (see test_text.py). Since its
# 2021 fix nothing is normalised, on either side, when all references are the same: the punctuation,
# digit and article cases below score 0 for that reason (test_text.py has them with distinct references).
@pytest.mark.parametrize(
    "prediction, references, official",
    [
        ("2.", ["2"] * TEN, 0.0),  # identical references: the full stop stays
        ("u.s.a.", ["usa"] * TEN, 0.0),
        ("1,000", ["1000"] * TEN, 0.0),
        ("none", ["0"] * TEN, 0.0),  # ... nor the manual map
        ("two", ["2"] * TEN, 0.0),
        ("A dog", ["dog"] * TEN, 0.0),  # ... nor articles
        ("yes.", ["yes"] * TEN, 0.0),
        ("3.5", ["3.5"] * TEN, 1.0),
        ("t-shirt", ["t-shirt"] * TEN, 1.0),
        ("$5", ["5"] * TEN, 0.0),  # "$" is not in the official list
        ("Yes!", ["yes"] * TEN, 0.0),  # identical references: no lower case, "!" kept
        ("dog's", ["dogs"] * TEN, 0.0),  # "'" is not in the list either
        ("10 30", ["10:30"] * TEN, 0.0),  # identical references are not normalised
        ("yes", ["Yes"] * TEN, 0.0),  # ... not even lower-cased
        ("yes", ["Yes"] * 5 + ["yes"] * 5, 1.0),  # distinct ones: both sides fully normalised
        ("cat", ["cat", "cat"] + ["dog"] * 8, 0.6),  # (2 x 1/3 + 8 x 2/3) / 10
        ("cat", ["cat"], 0.0),  # one reference: no other annotator can agree
        ("cat", ["cat"] * 3, 2 / 3),  # three: always divided by 3
        (
            "dont",
            ["don't"] * TEN,
            0.0,
        ),  # identical references: the contraction table is not applied
    ],
)
def test_vqa_accuracy_is_the_official_evaluation(prediction, references, official):
    assert text.vqa_accuracy([prediction], [references]) == [pytest.approx(official)]


def test_vqa_accuracy_lenient_rule_is_one_parameter_away():
    assert text.vqa_accuracy(
        ["cat", "cat", "Yes"], [["cat"], ["cat"] * 3, ["yes"] * TEN], rule="lenient"
    ) == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="rule"):
        text.vqa_accuracy(["cat"], [["cat"]], rule="loose")


@pytest.mark.parametrize(
    "prediction, references, official, normalized",
    [
        (
            "Denver Broncos",
            ["Denver Broncos", "Denver R. Broncos"],
            1.0,
            1.0,
        ),  # the script's published example
        ("12/15/89", ["12/15/88"], 0.875, 0.875),
        ("Dear dr. Lobo", ["Dear Dr. Lobo", "Dr. Lobo"], 1.0, 1.0),
        ("abxy", ["abcd"], 0.5, 0.5),  # exactly at the threshold: kept
        ("abxyz", ["abcde"], 0.0, 0.0),
        ("  parus  ", ["paris"], 1 - 1 / 9, 0.8),  # the raw strings' length divides
        ("ß", ["s"], 0.5, 0.0),  # "ß".upper() is "SS": two characters long
        ("", [""], 1.0, 1.0),
    ],
)
def test_anls_is_the_docvqa_script(prediction, references, official, normalized):
    assert text.anls([prediction], [references]) == [pytest.approx(official)]
    assert text.anls([prediction], [references], length="normalized") == [pytest.approx(normalized)]


CAPTIONS = [
    (
        "a man is playing football in the field!!!",
        ["a man is playing football in the field", "a man plays soccer"],
    ),
    (
        "A woman in a T-shirt, holding a cup.",
        ["a woman wearing a t-shirt holds a cup", "woman with a cup"],
    ),
    ("it costs $3.50 at 10:30", ["the price is 3.50 dollars", "it is 10:30"]),
    ("a dog", ["a dog runs on the beach", "the dog is running"]),
]


def test_cider_is_pycocoevalcaps_pipeline_run_directly():
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    preds, refs = [p for p, _ in CAPTIONS], [r for _, r in CAPTIONS]
    tok = PTBTokenizer()
    gts = tok.tokenize({i: [{"caption": x} for x in r] for i, r in enumerate(refs)})
    res = tok.tokenize({i: [{"caption": p}] for i, p in enumerate(preds)})
    _, reference = Cider().compute_score(gts, res)
    assert text.cider(preds, refs) == pytest.approx([float(x) for x in reference])
    assert (
        text.cider(preds, refs, tokenizer="regex")[0] < text.cider(preds, refs)[0]
    )  # "!!!" kept as tokens costs


def test_meteor_uses_nltks_tokenisation():
    from nltk.translate.meteor_score import meteor_score

    from lib.metrics.wordnet import ensure_wordnet

    pred, ref = "A well-known man wears a t-shirt.", "the well-known man is wearing a t-shirt ."
    expected = meteor_score(
        [["the", "well-known", "man", "is", "wearing", "a", "t-shirt", "."]],
        ["a", "well-known", "man", "wears", "a", "t-shirt", "."],
        wordnet=ensure_wordnet(),
    )
    assert text.meteor([pred], [[ref]]) == [pytest.approx(expected)]
    assert text.nltk_tokenize(pred) == ["a", "well-known", "man", "wears", "a", "t-shirt", "."]
