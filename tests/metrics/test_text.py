"""Each text metric equals its reference library called directly on the same inputs, and the
hand-written ones (ANLS, VQA accuracy) reproduce their published definitions."""

import math

import pytest

from lib.metrics import text as T

PREDS = ["a cat sits on the mat", "two dogs play in the park", "the red car", "", "Completely unrelated words here"]
REFS = [["the cat sat on the mat", "a cat on a mat"], ["2 dogs playing in a park"], ["a red car", "red automobile", "car"],
        ["nothing"], ["a man rides a horse on the beach"]]


def test_bleu_is_sacrebleu_sentence_bleu():
    import sacrebleu

    assert T.bleu(PREDS, REFS) == pytest.approx([sacrebleu.sentence_bleu(p, r).score / 100 for p, r in zip(PREDS, REFS)])
    assert T.bleu(["the cat sat on the mat"], [["the cat sat on the mat"]])[0] == pytest.approx(1.0)


def test_rouge_l_is_rouge_score_best_over_references():
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    expected = [max(scorer.score(r, p)["rougeL"].fmeasure for r in refs) for p, refs in zip(PREDS, REFS)]
    assert T.rouge_l(PREDS, REFS) == pytest.approx(expected)


def test_meteor_is_nltk_meteor_with_wordnet():
    from nltk.translate.meteor_score import meteor_score

    from lib.metrics.wordnet import ensure_wordnet

    expected = [meteor_score([T.tokenize(r) for r in refs], T.tokenize(p), wordnet=ensure_wordnet())
                for p, refs in zip(PREDS, REFS)]
    assert T.meteor(PREDS, REFS) == pytest.approx(expected)
    # WordNet is really used: a synonym ("auto" shares car.n.01 with "car") beats an unrelated word
    syn, other = T.meteor(["the auto is red", "the banana is red"], [["the car is red"]] * 2)
    assert syn > other


def test_cider_is_pycocoevalcap_cider():
    from pycocoevalcap.cider.cider import Cider

    gts = {i: [" ".join(T.tokenize(r)) for r in refs] for i, refs in enumerate(REFS)}
    res = {i: [" ".join(T.tokenize(p))] for i, p in enumerate(PREDS)}
    corpus, per_item = Cider().compute_score(gts, res)
    ours = T.cider(PREDS, REFS)
    assert ours == pytest.approx(list(per_item))
    assert sum(ours) / len(ours) == pytest.approx(corpus)


def test_bertscore_is_bert_score_with_local_minilm():
    import bert_score

    from lib.models.tiny import minilm_path

    keep = [i for i, p in enumerate(PREDS) if p]
    _, _, f1 = bert_score.score([PREDS[i] for i in keep], [REFS[i] for i in keep], model_type=str(minilm_path()),
                                num_layers=6, device="cpu")
    ours = T.bertscore(PREDS, REFS)
    assert [ours[i] for i in keep] == pytest.approx([float(x) for x in f1], abs=1e-5)
    assert ours[PREDS.index("")] == 0.0  # an empty answer scores 0 (bert-score cannot encode it under transformers 5)
    assert ours[0] > ours[4]  # a paraphrase beats unrelated words


def test_anls_follows_the_docvqa_definition():
    assert T.anls(["Hello"], [["hello"]]) == [1.0]
    # one edit in five characters: NL = 0.2 -> 0.8; beyond the 0.5 threshold -> 0
    assert T.anls(["hellp"], [["hello"]]) == [pytest.approx(0.8)]
    assert T.anls(["xyz"], [["hello"]]) == [0.0]
    assert T.anls(["hellp"], [["nope", "hello"]]) == [pytest.approx(0.8)]  # best reference


def test_vqa_accuracy_averages_over_annotator_subsets():
    refs = ["2"] * 2 + ["two dogs"] * 8
    # "2" matches 2 of 10: leaving out a "2" leaves 1 match (1/3), else 2 matches (2/3)
    expected = (2 * (1 / 3) + 8 * (2 / 3)) / 10
    assert T.vqa_accuracy(["Two."], [refs]) == [pytest.approx(expected)]
    assert T.vqa_accuracy(["yes"], [["yes"] * 10]) == [1.0]
    assert T.vqa_accuracy(["no"], [["yes"] * 10]) == [0.0]
    assert T.vqa_accuracy(["a Cat."], [["cat"]], rule="lenient") == [1.0]  # lenient: one reference is exact match


def test_normalisation_and_exact_match():
    assert T.normalize_vqa("The Two  dogs, running!") == "2 dogs running!"  # "!" is not in the official list
    assert T.normalize_vqa("3.5 meters.") == "3.5 meters"
    assert T.exact_match(["A dog."], [["dog", "puppy"]]) == [1.0]


def test_bad_reference_lists_name_the_item():
    with pytest.raises(ValueError, match="item 1"):
        T.bleu(["a", "b"], [["a"], "b"])
    with pytest.raises(ValueError, match="2 predictions but 1"):
        T.anls(["a", "b"], [["a"]])
    assert not math.isnan(T.rouge_l([""], [["x"]])[0])
