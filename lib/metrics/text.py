"""Text metrics, one score per prediction (so any subset can be averaged and bootstrapped).

Each wraps the library the field uses - sacrebleu, rouge-score, NLTK (METEOR), pycocoevalcap
(CIDEr; its SPICE is never called: it downloads CoreNLP), bert-score - and takes, per item, one
prediction and a list of references. Scores are in [0, 1] except CIDEr (0-10 scale).

Hand-written, with reasons: ANLS (a few lines over rapidfuzz's Levenshtein distance; the official
DocVQA script is not distributed as a package - this computes what it computes), VQA accuracy and
its answer normalisation (the official VQA evaluation script, GT-Vision-Lab/VQA ``vqaEval.py``, is
not a package either; its rules are restated here and tested on its cases).
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


def bleu_corpus(predictions: Sequence[str], references: Sequence[Sequence[str]], n_resamples: int = 1000,
                seed: int = 0) -> tuple[float, float, float]:
    """Corpus BLEU / 100 as sacrebleu reports it (13a tokenizer, n-gram counts summed over the
    items before the precisions; items may have different numbers of references), with a
    percentile bootstrap interval over items. The YesBut paper's tool reports this, not the mean
    of sentence BLEU (:func:`bleu`)."""
    import numpy as np
    from sacrebleu.metrics import BLEU

    _check(predictions, references, "bleu_corpus")
    if not predictions:
        return float("nan"), float("nan"), float("nan")
    scorer = BLEU()
    width = max(len(r) for r in references)
    streams = [[r[k] if k < len(r) else None for r in references] for k in range(width)]
    stats = np.asarray(scorer._extract_corpus_statistics(list(predictions), streams), dtype=np.int64)

    def score(rows) -> float:
        return scorer._compute_score_from_stats(rows.sum(axis=0).tolist()).score / 100

    value = score(stats)
    if len(stats) < 2:
        return value, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = [score(stats[rng.integers(0, len(stats), len(stats))]) for _ in range(n_resamples)]
    low, high = np.percentile(draws, [2.5, 97.5])
    return value, float(low), float(high)


@lru_cache(maxsize=2)
def _rouge_scorer(stemmer: bool):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stemmer)


def rouge_l(predictions: Sequence[str], references: Sequence[Sequence[str]], stemmer: bool = True) -> list[float]:
    """ROUGE-L F-measure (rouge-score), the best over the references."""
    _check(predictions, references, "rouge_l")
    scorer = _rouge_scorer(stemmer)
    return [scorer.score_multi(list(r), p)["rougeL"].fmeasure for p, r in zip(predictions, references)]


def nltk_tokenize(text: str) -> list[str]:
    """NLTK's word tokenisation (``word_tokenize`` without punkt's sentence split, which needs a
    download and only changes how a full stop inside the text attaches), lower-cased."""
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer().tokenize(text.lower())


def meteor(predictions: Sequence[str], references: Sequence[Sequence[str]], tokenizer: str = "nltk") -> list[float]:
    """METEOR as NLTK computes it (``nltk.translate.meteor_score``, WordNet synonyms, the best over
    references), on NLTK's own word tokenisation (:func:`nltk_tokenize`): "t-shirt" and
    "well-known" stay one token, as in the paper's tool. ``tokenizer="regex"`` is our old split
    into word and punctuation runs."""
    from nltk.translate.meteor_score import meteor_score

    _check(predictions, references, "meteor")
    split = {"nltk": nltk_tokenize, "regex": tokenize}[tokenizer]
    from lib.metrics.wordnet import ensure_wordnet

    wordnet = ensure_wordnet()
    return [meteor_score([split(x) for x in r], split(p), wordnet=wordnet) for p, r in zip(predictions, references)]


def ptb_tokenize(texts: Sequence[str]) -> list[str]:
    """coco-caption's tokenisation: Stanford's PTBTokenizer (the jar pycocoevalcap ships, run with
    Java) lower-casing, then its punctuation tokens dropped - what ``pycocoevalcap`` feeds every
    caption metric. One Java process for all the texts; empty texts stay empty."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    keep = [i for i, t in enumerate(texts) if t.strip()]
    out = [""] * len(texts)
    if keep:
        tokenized = PTBTokenizer().tokenize({i: [{"caption": texts[i]}] for i in keep})
        for i in keep:
            out[i] = tokenized[i][0]
    return out


def cider(predictions: Sequence[str], references: Sequence[Sequence[str]], tokenizer: str = "ptb") -> list[float]:
    """CIDEr-D per item as coco-caption computes it (pycocoevalcap's ``Cider`` on its PTBTokenizer
    output: "field!!!" is "field", "t-shirt" one token). IDF comes from these references, so the
    mean of the scores is the corpus CIDEr of exactly this set of items. ``tokenizer="regex"`` is our
    old split (punctuation kept as tokens), no Java needed."""
    from pycocoevalcap.cider.cider import Cider

    _check(predictions, references, "cider")
    if not predictions:
        return []
    if tokenizer == "ptb":
        flat = ptb_tokenize([p for p in predictions] + [x for r in references for x in r])
        res_tok, it = flat[:len(predictions)], iter(flat[len(predictions):])
        ref_tok = [[next(it) for _ in r] for r in references]
    elif tokenizer == "regex":
        res_tok = [" ".join(tokenize(p)) for p in predictions]
        ref_tok = [[" ".join(tokenize(x)) for x in r] for r in references]
    else:
        raise ValueError(f"cider: tokenizer={tokenizer!r}; choose ptb (coco-caption) or regex")
    gts = {i: r for i, r in enumerate(ref_tok)}
    res = {i: [p] for i, p in enumerate(res_tok)}
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


def anls(predictions: Sequence[str], references: Sequence[Sequence[str]], threshold: float = 0.5,
         length: str = "raw") -> list[float]:
    """Average Normalised Levenshtein Similarity, as the official DocVQA / RRC evaluation script
    computes it: per reference, the Levenshtein distance between the lower-cased, space-collapsed
    strings divided by the longer of the two *raw* strings (``len(s.upper())``: padding and
    characters that grow when upper-cased count); the score is 1 - the smallest of those
    distances, kept when it is at least ``threshold`` (so an exact 0.5 stays 0.5) and 0 below.
    ``length="normalized"`` divides by the normalised strings' length instead (our cleaner reading)."""
    from rapidfuzz.distance import Levenshtein

    if length not in ("raw", "normalized"):
        raise ValueError(f"anls: length={length!r}; choose raw (the official script) or normalized")
    _check(predictions, references, "anls")
    out = []
    for p, refs in zip(predictions, references):
        det = " ".join(p.strip().lower().split())
        distances = []
        for r in refs:
            gt = " ".join(r.strip().lower().split())
            n = max(len(r.upper()), len(p.upper())) if length == "raw" else max(len(gt), len(det))
            distances.append(0.0 if n == 0 else Levenshtein.distance(gt, det) / n)
        score = 1 - min(distances)
        out.append(score if score >= threshold else 0.0)
    return out


# --- VQA accuracy -------------------------------------------------------------------------------
# The rules of the official VQA evaluation (GT-Vision-Lab/VQA, vqaEval.py), restated.

_MANUAL_MAP = {"none": "0", **{w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}}
_ARTICLES = {"a", "an", "the"}
_OFFICIAL_PUNCT = [";", ":", "/", "'", "[", "]", '"', "(", ")", "=", "+", "\\", "_", ">", "<", "@", "`", ",", "?"]
_COMMA_BETWEEN_DIGITS = re.compile(r"(\d)(,)(\d)")
# The official pattern as written: "(?!<=" is a lookahead, not a lookbehind, so every full stop not
# followed by a digit goes ("2." -> "2", "u.s.a." -> "usa"), at most 32 of them (it passes re.UNICODE
# where re.sub takes its count).
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
# The common entries of the official contraction table, with its apostrophes (it restores most of
# them with a typographic one); the table's rarer entries ("y'all'd've") are left out.
_CONTRACTIONS = {"aint": "ain't", "arent": "aren't", "cant": "can't", "couldve": "could've", "couldnt": "couldn't",
                 "didnt": "didn’t", "doesnt": "doesn’t", "dont": "don’t", "hadnt": "hadn’t", "hasnt": "hasn’t",
                 "havent": "haven’t", "hes": "he’s", "Im": "I’m", "Ive": "I’ve", "isnt": "isn’t", "itll": "it’ll",
                 "shouldnt": "shouldn’t", "thats": "that’s", "theres": "there’s", "theyre": "they’re", "wasnt": "wasn’t",
                 "werent": "weren’t", "weve": "we've", "whats": "what’s", "wheres": "where's", "whos": "who’s",
                 "wont": "won’t", "wouldnt": "wouldn’t", "youre": "you’re", "youve": "you’ve"}
VQA_RULES = ("official", "lenient")


def vqa_punctuation(text: str) -> str:
    """The official ``processPunctuation``: a punctuation mark next to a space (or any mark, when a
    comma sits between digits: "1,000") is dropped, otherwise it becomes a space; full stops not
    before a digit are dropped. Hyphens, "!" and "$" are not in its list and stay."""
    out = text
    digits_comma = _COMMA_BETWEEN_DIGITS.search(text) is not None
    for p in _OFFICIAL_PUNCT:
        out = out.replace(p, "" if (p + " " in text or " " + p in text or digits_comma) else " ")
    return _PERIOD.sub("", out, count=32)


def normalize_vqa(answer: str) -> str:
    """How the official evaluation normalises a *predicted* answer: newlines and tabs to spaces,
    outer spaces stripped, :func:`vqa_punctuation`, lower case, number words (and "none") to digits,
    articles dropped, contractions restored."""
    text = vqa_punctuation(answer.replace("\n", " ").replace("\t", " ").strip())
    words = [_MANUAL_MAP.get(w, w) for w in text.lower().split()]
    return " ".join(_CONTRACTIONS.get(w, w) for w in words if w not in _ARTICLES)


def vqa_accuracy(predictions: Sequence[str], references: Sequence[Sequence[str]], rule: str = "official") -> list[float]:
    """VQA accuracy as the official ``vqaEval.py`` computes it: the prediction normalised
    (:func:`normalize_vqa`); the references taken as they are, or - only when they are not all the
    same - with :func:`vqa_punctuation` applied; then, for each reference left out in turn,
    min(1, matches among the others / 3), averaged. With fewer than 4 references this cannot reach 1
    (one reference always gives 0), exactly as the official code behaves.

    ``rule="lenient"`` is our reading for datasets with few references: both sides fully normalised,
    the threshold min(3, n - 1), a single reference scored by exact match."""
    if rule not in VQA_RULES:
        raise ValueError(f"vqa_accuracy: rule={rule!r}; choose one of {VQA_RULES}")
    _check(predictions, references, "vqa_accuracy")
    out = []
    for p, refs in zip(predictions, references):
        res = normalize_vqa(p)
        if rule == "lenient":
            gts = [normalize_vqa(r) for r in refs]
            if len(gts) == 1:
                out.append(float(res == gts[0]))
                continue
            need = min(3, len(gts) - 1)
        else:
            gts = [vqa_punctuation(r) for r in refs] if len(set(refs)) > 1 else list(refs)
            need = 3
        accs = [min(1.0, sum(g == res for j, g in enumerate(gts) if j != i) / need) for i in range(len(gts))]
        out.append(sum(accs) / len(accs))
    return out


def exact_match(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> list[float]:
    """1 when the normalised prediction equals one normalised reference (VQA normalisation, both sides)."""
    _check(predictions, references, "exact_match")
    return [float(normalize_vqa(p) in {normalize_vqa(r) for r in refs}) for p, refs in zip(predictions, references)]
