"""Text metrics, one score per prediction (so any subset can be averaged and bootstrapped).

Each wraps the library the field uses - sacrebleu, rouge-score, NLTK (METEOR), pycocoevalcap
(CIDEr; its SPICE is never called: it downloads CoreNLP), bert-score - and takes, per item, one
prediction and a list of references. Scores are in [0, 1] except CIDEr (0-10 scale).

Hand-written, with reasons: ANLS (a few lines over rapidfuzz's normalised Levenshtein; the DocVQA
definition has no packaged implementation), VQA accuracy and its answer normalisation (the
official VQA evaluation script is not distributed as a package; this follows its rules).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens (METEOR / CIDEr input; NLTK's punkt needs a download)."""
    return _TOKEN.findall(text.lower())


def _check(predictions: Sequence[str], references: Sequence[Sequence[str]], name: str) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"{name}: {len(predictions)} predictions but {len(references)} reference lists")
    for i, refs in enumerate(references):
        if isinstance(refs, str) or not refs:
            raise ValueError(f"{name}: item {i} needs a non-empty list of reference strings, got {refs!r}")


def bleu(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> list[float]:
    """Sentence BLEU (sacrebleu defaults: 13a tokenizer, exponential smoothing) / 100."""
    import sacrebleu

    _check(predictions, references, "bleu")
    return [sacrebleu.sentence_bleu(p, list(r)).score / 100 for p, r in zip(predictions, references)]


@lru_cache(maxsize=2)
def _rouge_scorer(stemmer: bool):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stemmer)


def rouge_l(predictions: Sequence[str], references: Sequence[Sequence[str]], stemmer: bool = True) -> list[float]:
    """ROUGE-L F-measure (rouge-score), the best over the references."""
    _check(predictions, references, "rouge_l")
    scorer = _rouge_scorer(stemmer)
    return [scorer.score_multi(list(r), p)["rougeL"].fmeasure for p, r in zip(predictions, references)]


def meteor(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> list[float]:
    """METEOR (NLTK, WordNet synonyms; the best over references as NLTK defines it)."""
    from nltk.translate.meteor_score import meteor_score

    _check(predictions, references, "meteor")
    from lib.metrics.wordnet import ensure_wordnet

    wordnet = ensure_wordnet()
    return [meteor_score([tokenize(x) for x in r], tokenize(p), wordnet=wordnet) for p, r in zip(predictions, references)]


def cider(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> list[float]:
    """CIDEr-D per item (pycocoevalcap). IDF comes from these references, so the mean of the
    scores is the corpus CIDEr of exactly this set of items."""
    from pycocoevalcap.cider.cider import Cider

    _check(predictions, references, "cider")
    if not predictions:
        return []
    gts = {i: [" ".join(tokenize(x)) for x in r] for i, r in enumerate(references)}
    res = {i: [" ".join(tokenize(p))] for i, p in enumerate(predictions)}
    _, scores = Cider().compute_score(gts, res)
    return [float(s) for s in scores]


def bertscore(predictions: Sequence[str], references: Sequence[Sequence[str]], model: str | None = None,
              num_layers: int | None = None, batch_size: int = 64) -> list[float]:
    """BERTScore F1 (bert-score), the best over references. Default model: the local MiniLM
    (all-MiniLM-L6-v2, 6 layers; no rescaling baseline exists for it). Any HF model id or path
    works with its own ``num_layers``."""
    _check(predictions, references, "bertscore")
    if not predictions:
        return []
    if model is None:
        from lib.models.tiny import minilm_path

        model, num_layers = str(minilm_path()), num_layers or 6
    # An empty answer scores 0: bert-score cannot encode "" under transformers 5 (its empty-string
    # path calls a tokenizer method transformers removed), and an empty answer conveys nothing.
    keep = [i for i, p in enumerate(predictions) if p.strip()]
    out = [0.0] * len(predictions)
    if keep:
        refs = [[r for r in references[i] if r.strip()] or ["."] for i in keep]
        _, _, f1 = _bert_scorer(model, num_layers, batch_size).score([predictions[i] for i in keep], refs)
        for i, x in zip(keep, f1):
            out[i] = float(x)
    return out


@lru_cache(maxsize=2)
def _bert_scorer(model: str, num_layers: int | None, batch_size: int):
    """One loaded BERTScorer per model (loading costs seconds; scoring a batch, milliseconds)."""
    import bert_score

    return bert_score.BERTScorer(model_type=model, num_layers=num_layers, batch_size=batch_size,
                                 device="cpu" if not _cuda() else None)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def anls(predictions: Sequence[str], references: Sequence[Sequence[str]], threshold: float = 0.5) -> list[float]:
    """Average Normalised Levenshtein Similarity (DocVQA): per item, the best over references of
    1 - NL(prediction, reference) when NL < ``threshold``, else 0; case and outer spaces ignored."""
    from rapidfuzz.distance import Levenshtein

    _check(predictions, references, "anls")
    out = []
    for p, refs in zip(predictions, references):
        p = " ".join(p.lower().split())
        best = 0.0
        for r in refs:
            nl = Levenshtein.normalized_distance(p, " ".join(r.lower().split()))
            best = max(best, 1 - nl if nl < threshold else 0.0)
        out.append(best)
    return out


# --- VQA accuracy -------------------------------------------------------------------------------

_NUMBERS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}
_ARTICLES = {"a", "an", "the"}
_PUNCT = re.compile(r"(?<!\d)[.](?!\d)|[;/\[\]\"{}()=+\\_\-><@`,?!*#%^&$:']")
_CONTRACTIONS = {"dont": "don't", "doesnt": "doesn't", "isnt": "isn't", "arent": "aren't", "cant": "can't",
                 "wont": "won't", "im": "i'm", "ive": "i've", "youre": "you're", "thats": "that's", "whats": "what's"}


def normalize_vqa(answer: str) -> str:
    """The VQA evaluation's answer normalisation: lower case, punctuation removed (decimal points
    kept), number words to digits, articles dropped, common contractions restored."""
    text = answer.lower().replace("\n", " ").replace("\t", " ").strip()
    text = _PUNCT.sub(lambda m: "" if m.group(0) == "'" else " ", text)
    words = []
    for w in text.split():
        w = _NUMBERS.get(w, w)
        if w not in _ARTICLES:
            words.append(_CONTRACTIONS.get(w, w))
    return " ".join(words)


def vqa_accuracy(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> list[float]:
    """VQA accuracy: min(#matching annotators / 3, 1), averaged over the leave-one-out subsets of the
    annotators (10 in VQAv2). With n < 4 references the threshold is n - 1 (so one reference is exact match)."""
    _check(predictions, references, "vqa_accuracy")
    out = []
    for p, refs in zip(predictions, references):
        p = normalize_vqa(p)
        gts = [normalize_vqa(r) for r in refs]
        if len(gts) == 1:
            out.append(float(p == gts[0]))
            continue
        need = min(3, len(gts) - 1)
        accs = [min(1.0, sum(g == p for j, g in enumerate(gts) if j != i) / need) for i in range(len(gts))]
        out.append(sum(accs) / len(accs))
    return out


def exact_match(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> list[float]:
    """1 when the normalised prediction equals one normalised reference (VQA normalisation)."""
    _check(predictions, references, "exact_match")
    return [float(normalize_vqa(p) in {normalize_vqa(r) for r in refs}) for p, refs in zip(predictions, references)]
