"""Each text metric equals its reference library called directly on the same inputs, and the
hand-written ones (ANLS, VQA accuracy) reproduce their published definitions."""

import math

import pytest

from lib.metrics import text

PREDS = [
    "a cat sits on the mat",
    "two dogs play in the park",
    "the red car",
    "",
    "Completely unrelated words here",
]
REFS = [
    ["the cat sat on the mat", "a cat on a mat"],
    ["2 dogs playing in a park"],
    ["a red car", "red automobile", "car"],
    ["nothing"],
    ["a man rides a horse on the beach"],
]


def test_bleu_is_sacrebleu_sentence_bleu():
    import sacrebleu

    assert text.bleu(PREDS, REFS) == pytest.approx(
        [sacrebleu.sentence_bleu(p, r).score / 100 for p, r in zip(PREDS, REFS)]
    )
    assert text.bleu(["the cat sat on the mat"], [["the cat sat on the mat"]])[0] == pytest.approx(
        1.0
    )


@pytest.mark.parametrize("stemmer", [True, False])
def test_rouge_l_is_rouge_score_best_over_references(stemmer):
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stemmer)
    expected = [
        max(scorer.score(r, p)["rougeL"].fmeasure for r in refs) for p, refs in zip(PREDS, REFS)
    ]
    assert text.rouge_l(PREDS, REFS, stemmer=stemmer) == pytest.approx(expected)


def test_rouge_l_stems_by_default_as_the_yesbut_reference_tool_does():
    """The YesBut repository scores ROUGE-L with py-rouge, whose ``Rouge()`` stems by default;
    rouge-score's own default (``use_stemmer=False``) is ``stemmer=False``. Worked by hand: stemmed,
    "the cats are running" is "the cat are run" against "the cat run" (LCS 3, P 3/4, R 1, F 6/7);
    unstemmed only "the" is shared (P 1/4, R 1/3, F 2/7)."""
    from rouge_score import rouge_scorer

    pred, ref = "the cats are running", "the cat runs"
    assert text.ROUGE_STEMMER is True
    assert text.rouge_l([pred], [[ref]]) == [pytest.approx(6 / 7)]
    for stemmer, hand in ((True, 6 / 7), (False, 2 / 7)):
        library = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stemmer)
        assert library.score(ref, pred)["rougeL"].fmeasure == pytest.approx(hand)
        assert text.rouge_l([pred], [[ref]], stemmer=stemmer) == [pytest.approx(hand)]


def test_meteor_is_nltk_meteor_with_wordnet():
    from nltk.translate.meteor_score import meteor_score

    from lib.metrics.wordnet import ensure_wordnet

    expected = [
        meteor_score([text.tokenize(r) for r in refs], text.tokenize(p), wordnet=ensure_wordnet())
        for p, refs in zip(PREDS, REFS)
    ]
    assert text.meteor(PREDS, REFS) == pytest.approx(expected)
    # WordNet is really used: a synonym ("auto" shares car.n.01 with "car") beats an unrelated word
    syn, other = text.meteor(["the auto is red", "the banana is red"], [["the car is red"]] * 2)
    assert syn > other


def test_the_english_wordnet_reads_as_nltks_stock_reader():
    """lib's WordNet skips only NLTK's map for the multilingual wordnet: every English lemma, its
    synsets, morphy's base forms and METEOR are those of NLTK's own reader on the same files."""
    from nltk.corpus.reader import WordNetCorpusReader
    from nltk.translate.meteor_score import meteor_score

    from lib.metrics.wordnet import ensure_wordnet

    ours = ensure_wordnet()
    stock = WordNetCorpusReader(ours.root, None)  # NLTK's reader, map included
    assert ours.map30 is None and stock.map30, "the map is what lib's reader leaves out"
    assert ours._lemma_pos_offset_map == stock._lemma_pos_offset_map  # every lemma and its synsets
    for word in ("cats", "running", "auto", "better", "geese", "red", "panels", "satirical"):
        assert ours.morphy(word) == stock.morphy(word), word
        assert [(s.name(), s.lemma_names()) for s in ours.synsets(word)] == [
            (s.name(), s.lemma_names()) for s in stock.synsets(word)
        ], word
    for p, refs in zip(PREDS, REFS):
        tokens = [text.tokenize(r) for r in refs], text.tokenize(p)
        assert meteor_score(*tokens, wordnet=ours) == meteor_score(*tokens, wordnet=stock)


def test_cider_is_pycocoevalcap_cider():
    from pycocoevalcap.cider.cider import Cider

    gts = {i: [" ".join(text.tokenize(r)) for r in refs] for i, refs in enumerate(REFS)}
    res = {i: [" ".join(text.tokenize(p))] for i, p in enumerate(PREDS)}
    corpus, per_item = Cider().compute_score(gts, res)
    ours = text.cider(PREDS, REFS)
    assert ours == pytest.approx(list(per_item))
    assert sum(ours) / len(ours) == pytest.approx(corpus)


def test_bertscore_is_bert_score_with_local_minilm():
    import bert_score

    from lib.models.tiny import minilm_path

    keep = [i for i, p in enumerate(PREDS) if p]
    _, _, f1 = bert_score.score(
        [PREDS[i] for i in keep],
        [REFS[i] for i in keep],
        model_type=str(minilm_path()),
        num_layers=6,
        device="cpu",
    )
    ours = text.bertscore(PREDS, REFS)
    assert [ours[i] for i in keep] == pytest.approx([float(x) for x in f1], abs=1e-5)
    assert (
        ours[PREDS.index("")] == 0.0
    )  # an empty answer scores 0 (bert-score cannot encode it under transformers 5)
    assert ours[0] > ours[4]  # a paraphrase beats unrelated words


def test_anls_follows_the_docvqa_definition():
    assert text.anls(["Hello"], [["hello"]]) == [1.0]
    # one edit in five characters: NL = 0.2 -> 0.8; beyond the 0.5 threshold -> 0
    assert text.anls(["hellp"], [["hello"]]) == [pytest.approx(0.8)]
    assert text.anls(["xyz"], [["hello"]]) == [0.0]
    assert text.anls(["hellp"], [["nope", "hello"]]) == [pytest.approx(0.8)]  # best reference


def test_vqa_accuracy_averages_over_annotator_subsets():
    refs = ["2"] * 2 + ["two dogs"] * 8
    # "2" matches 2 of 10: leaving out a "2" leaves 1 match (1/3), else 2 matches (2/3)
    expected = (2 * (1 / 3) + 8 * (2 / 3)) / 10
    assert text.vqa_accuracy(["Two."], [refs]) == [pytest.approx(expected)]
    assert text.vqa_accuracy(["yes"], [["yes"] * 10]) == [1.0]
    assert text.vqa_accuracy(["no"], [["yes"] * 10]) == [0.0]
    assert text.vqa_accuracy(["a Cat."], [["cat"]], rule="lenient") == [
        1.0
    ]  # lenient: one reference is exact match


# Expected values from running the official script itself: GT-Vision-Lab/VQA
# PythonEvaluationTools/vqaEvaluation/vqaEval.py at a013f00 (2021), unmodified, under Python 2.7.18
# (VQAEval.evaluate on these cases, answers loaded from JSON, answer_id 1..n; the raw per-question
# accuracy before its rounding to 100 x 2 decimals), cross-checked by a minimal Python 3 port.
@pytest.mark.parametrize(
    "prediction, references, official",
    [
        ("yes!", ["yes"] * 8 + ["no"] * 2, 1.0),  # "!" is in the list
        ("t shirt", ["t-shirt"] * 9 + ["shirt"], 1.0),  # "-" becomes a space in the references
        ("Yes", ["yes"] * 10, 0.0),  # identical references: nothing normalised, not even case
        ("dont", ["don't"] * 9 + ["no"], 1.0),  # restored with a straight apostrophe
        ("doesnt", ["doesn't"] * 5 + ["no"] * 5, 1.0),
        ("dont", ["don't"] * 10, 0.0),  # identical references: no contraction table
        ("Im", ["i'm"] * 9 + ["me"], 0.0),  # lower-cased first, so the table's "Im" never matches
        ("2.", ["2"] * 9 + ["3"], 1.0),
        ("u.s.a.", ["usa"] * 9 + ["us"], 1.0),
        ("1,000", ["1000"] * 9 + ["100"], 1.0),
        ("yes, it is", ["yes it is"] * 9 + ["no"], 1.0),
        ("left/right", ["left right"] * 9 + ["left"], 1.0),
        ("10 30", ["10:30"] * 9 + ["11"], 0.0),  # ":" is not in the list
        ("dog's", ["dogs"] * 9 + ["dog"], 0.0),  # nor "'"
        ("$5", ["5"] * 9 + ["6"], 0.0),  # nor "$"
        ("yes ?", ["yes"] * 9 + ["no"], 1.0),  # a mark next to a space is dropped
        ("{red}", ["red"] * 9 + ["blue"], 1.0),
        ("3.5", ["3.5"] * 9 + ["4"], 1.0),  # a full stop before a digit stays
        ("yes" + "." * 40, ["yes"] * 9 + ["no"], 0.0),  # at most 32 full stops go
        (
            "\u0663.\u0665",
            ["\u0663\u0665"] * 9 + ["x"],
            1.0,
        ),  # Python 2's \d is ASCII: Arabic-Indic digits aren't digits
        ("two", ["2"] * 7 + ["3"] * 3, 1.0),
        ("none", ["0"] * 4 + ["1"] * 6, 1.0),
        ("Two Dogs", ["2 dogs"] * 2 + ["dogs"] * 8, 0.6),  # (2 x 1/3 + 8 x 2/3) / 10
        ("A dog", ["dog"] * 9 + ["cat"], 1.0),
        ("the red one", ["red 1"] * 9 + ["red"], 1.0),
        ("two", ["2"] * 10, 0.0),  # identical references: no digit mapping
        ("  yes\n", ["yes"] * 10, 1.0),  # newline and outer spaces stripped
        ("Yes", ["yes ", "yes"] * 5, 0.0),  # references identical once stripped
        ("yes", ["Yes"] * 5 + ["yes"] * 5, 1.0),  # distinct references: both sides normalised
        ("\u0130stanbul", ["istanbul"] * 9 + ["ankara"], 1.0),  # Python 2 lower-cases "İ" to "i"
        ("yes", ["yes"] * 10, 1.0),
        ("no", ["yes"] * 10, 0.0),
        ("cat", ["cat"] * 2 + ["dog"] * 8, 0.6),
        ("cat", ["cat"], 0.0),  # one reference: no other annotator can agree
        ("cat", ["cat"] * 3, 0.6666666666666666),  # three: always divided by 3
        ("blue", ["blue"] * 3 + ["navy"] * 7, 0.9),
        ("", ["yes"] * 9 + ["no"], 0.0),
    ],
)
def test_vqa_accuracy_equals_the_official_script(prediction, references, official):
    assert text.vqa_accuracy([prediction], [references]) == [
        official
    ]  # same arithmetic, so exactly equal


def test_normalisation_and_exact_match():
    assert (
        text.normalize_vqa("The Two  dogs, running!") == "2 dogs running"
    )  # "!" is in the official list
    assert text.normalize_vqa("3.5 meters.") == "3.5 meters"
    assert text.exact_match(["A dog."], [["dog", "puppy"]]) == [1.0]


def test_bad_reference_lists_name_the_item():
    with pytest.raises(ValueError, match="item 1"):
        text.bleu(["a", "b"], [["a"], "b"])
    with pytest.raises(ValueError, match="2 predictions but 1"):
        text.anls(["a", "b"], [["a"]])
    assert not math.isnan(text.rouge_l([""], [["x"]])[0])


def test_the_java_tokenizers_chatter_is_logged_not_printed(capfd, caplog):
    """A notebook shows no red PTBTokenizer block under a scoring cell; the lines are kept in the log."""
    import logging

    from lib.metrics.ptb import ptb_tokenize

    caplog.set_level(logging.INFO, logger="lib.metrics.ptb")
    assert ptb_tokenize(["A dog, running!", ""]) == ["a dog running", ""]
    assert "PTBTokenizer" not in capfd.readouterr().err
    assert any("PTBTokenizer tokenized" in r.getMessage() for r in caplog.records)
