"""Text metrics, one score per prediction (so any subset can be averaged and bootstrapped).

Each wraps the library the field uses - sacrebleu, rouge-score, NLTK (METEOR), pycocoevalcap
(CIDEr; its SPICE is never called: it downloads CoreNLP), bert-score - and takes, per item, one
prediction and a list of references. Scores are in [0, 1] except CIDEr (0-10 scale).

Hand-written, with reasons: ANLS (a few lines over rapidfuzz's Levenshtein distance; the official
DocVQA script is not distributed as a package - this computes what it computes), VQA accuracy and
its answer normalisation (the official VQA evaluation script, GT-Vision-Lab/VQA ``vqaEval.py``, is
not a package either; its rules are restated here and tested against values from running it).
``vqa_accuracy(rule="official")`` reproduces, in the script's order: newline/tab to space and strip
on both sides; no further normalisation when all references are the same; otherwise, on both sides,
its punctuation list (with "-" and "!", without ":" and "'"), its comma-between-digits and full-stop
regexes (including the ``(?!<=`` lookahead typo, the count of 32, Python 2's ASCII-only digits), lower
case, number words (and "none") to digits, articles dropped, its contraction table with straight
apostrophes; then the mean over the leave-one-out subsets of min(#matches / 3, 1).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from lib.metrics.ptb import ptb_tokenize
from lib.metrics.stats import item_or_cluster_resamples, n_clusters
from lib.metrics.wordnet import ensure_wordnet
from lib.models.tiny import minilm_path

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens (METEOR / CIDEr input; NLTK's punkt needs a download)."""
    return _TOKEN.findall(text.lower())


def _check(predictions: Sequence[str], references: Sequence[Sequence[str]], name: str) -> None:
    if len(predictions) != len(references):
        raise ValueError(
            f"{name}: {len(predictions)} predictions but {len(references)} reference lists"
        )
    for i, refs in enumerate(references):
        if isinstance(refs, str) or not refs:
            raise ValueError(
                f"{name}: item {i} needs a non-empty list of reference strings, got {refs!r}"
            )


def bleu(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> list[float]:
    """Sentence BLEU (sacrebleu defaults: 13a tokenizer, exponential smoothing) / 100."""
    import sacrebleu

    _check(predictions, references, "bleu")
    return [
        sacrebleu.sentence_bleu(p, list(r)).score / 100 for p, r in zip(predictions, references)
    ]


def bleu_corpus(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    n_resamples: int,
    seed: int = 0,
    clusters: Sequence | None = None,
) -> tuple[float, float, float]:
    """Corpus BLEU / 100 as sacrebleu reports it (13a tokenizer, n-gram counts summed over the
    items before the precisions; items may have different numbers of references), with a percentile
    bootstrap interval over items or whole ``clusters`` (one key per item: an image). The YesBut
    paper's tool reports this, not the mean of sentence BLEU (:func:`bleu`)."""
    import numpy as np
    from sacrebleu.metrics import BLEU

    _check(predictions, references, "bleu_corpus")
    if not predictions:
        return float("nan"), float("nan"), float("nan")
    scorer = BLEU()
    width = max(len(r) for r in references)
    streams = [[r[k] if k < len(r) else None for r in references] for k in range(width)]
    stats = np.asarray(scorer._extract_corpus_statistics(list(predictions), streams), np.int64)

    def score(rows) -> float:
        return scorer._compute_score_from_stats(rows.sum(axis=0).tolist()).score / 100

    value = score(stats)
    if len(stats) < 2 or n_clusters(clusters, len(stats)) < 2:
        return value, float("nan"), float("nan")
    draws = [
        score(stats[i]) for i in item_or_cluster_resamples(clusters, len(stats), n_resamples, seed)
    ]
    low, high = np.percentile(draws, [2.5, 97.5])
    return value, float(low), float(high)


# ROUGE-L stems words (rouge-score's Porter stemmer): the YesBut repository names py-rouge as its
# ROUGE-L tool, and py-rouge's Rouge() stems by default; rouge-score's own default does not stem.
ROUGE_STEMMER = True


@lru_cache(maxsize=2)
def _rouge_scorer(stemmer: bool):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stemmer)


def rouge_l(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    stemmer: bool = ROUGE_STEMMER,
) -> list[float]:
    """ROUGE-L F-measure (rouge-score), the best over the references. ``stemmer`` is rouge-score's
    ``use_stemmer``: True (:data:`ROUGE_STEMMER`) as the YesBut paper's tool scores,
    False as rouge-score does by default."""
    _check(predictions, references, "rouge_l")
    scorer = _rouge_scorer(stemmer)
    return [
        scorer.score_multi(list(r), p)["rougeL"].fmeasure for p, r in zip(predictions, references)
    ]


def nltk_tokenize(text: str) -> list[str]:
    """NLTK's word tokenisation (``word_tokenize`` without punkt's sentence split, which needs a
    download and only changes how a full stop inside the text attaches), lower-cased."""
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer().tokenize(text.lower())


def meteor(
    predictions: Sequence[str], references: Sequence[Sequence[str]], tokenizer: str = "nltk"
) -> list[float]:
    """METEOR as NLTK computes it (``nltk.translate.meteor_score``, WordNet synonyms, the best over
    references), on NLTK's own word tokenisation (:func:`nltk_tokenize`): "t-shirt" and
    "well-known" stay one token, as in the paper's tool. ``tokenizer="regex"`` is our old split
    into word and punctuation runs."""
    from nltk.translate.meteor_score import meteor_score

    _check(predictions, references, "meteor")
    split = {"nltk": nltk_tokenize, "regex": tokenize}[tokenizer]
    wordnet = ensure_wordnet()
    return [
        meteor_score([split(x) for x in r], split(p), wordnet=wordnet)
        for p, r in zip(predictions, references)
    ]


def cider(
    predictions: Sequence[str], references: Sequence[Sequence[str]], tokenizer: str = "ptb"
) -> list[float]:
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
        res_tok, it = flat[: len(predictions)], iter(flat[len(predictions) :])
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


def bertscore(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    model: str | None = None,
    num_layers: int | None = None,
    batch_size: int = 64,
) -> list[float]:
    """BERTScore F1 (bert-score), the best over references. Default model: the local MiniLM
    (all-MiniLM-L6-v2, 6 layers; no rescaling baseline exists for it). Any HF model id or path
    works with its own ``num_layers``."""
    _check(predictions, references, "bertscore")
    if not predictions:
        return []
    if model is None:
        model, num_layers = str(minilm_path()), num_layers or 6
    # An empty answer scores 0: bert-score cannot encode "" under transformers 5 (its empty-string
    # path calls a tokenizer method transformers removed), and an empty answer conveys nothing.
    keep = [i for i, p in enumerate(predictions) if p.strip()]
    out = [0.0] * len(predictions)
    if keep:
        refs = [[r for r in references[i] if r.strip()] or ["."] for i in keep]
        _, _, f1 = _bert_scorer(model, num_layers, batch_size).score(
            [predictions[i] for i in keep], refs
        )
        for i, x in zip(keep, f1):
            out[i] = float(x)
    return out


@lru_cache(maxsize=2)
def _bert_scorer(model: str, num_layers: int | None, batch_size: int):
    """One loaded BERTScorer per model (loading costs seconds; scoring a batch, milliseconds)."""
    import bert_score

    return bert_score.BERTScorer(
        model_type=model,
        num_layers=num_layers,
        batch_size=batch_size,
        device="cpu" if not _cuda() else None,
    )


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def anls(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    threshold: float = 0.5,
    length: str = "raw",
) -> list[float]:
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
# The official VQA evaluation (GT-Vision-Lab/VQA vqaEval.py at a013f00, the 2021 "processing answers"
# fix), restated; tests/metrics/test_text.py checks it against values from running that script.

_MANUAL_MAP = {
    "none": "0",
    **{
        w: str(i)
        for i, w in enumerate(
            ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
        )
    },
}
_ARTICLES = {"a", "an", "the"}
# Its list exactly: no ":", "'" or "$", which therefore stay ("10:30", "dog's"); full stops: _PERIOD.
_OFFICIAL_PUNCT = [
    ";",
    "/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
]
# re.ASCII: the script ran on Python 2, where \d in a pattern without re.UNICODE means [0-9] only.
_COMMA_BETWEEN_DIGITS = re.compile(r"(\d)(,)(\d)", re.ASCII)
# The official pattern as written: "(?!<=" is a lookahead, not a lookbehind, so every full stop not
# followed by a digit goes ("2." -> "2", "u.s.a." -> "usa"), at most 32 of them (it passes re.UNICODE
# where re.sub takes its count).
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)", re.ASCII)
# The official table verbatim (straight apostrophes, as since its 2016 fix). Keys are matched after
# lower-casing, so "Im", "Ive", "Id've" and "I'dve" never fire - as in the script.
_CONTRACTIONS = {
    "aint": "ain't",
    "arent": "aren't",
    "cant": "can't",
    "couldve": "could've",
    "couldnt": "couldn't",
    "couldn'tve": "couldn't've",
    "couldnt've": "couldn't've",
    "didnt": "didn't",
    "doesnt": "doesn't",
    "dont": "don't",
    "hadnt": "hadn't",
    "hadnt've": "hadn't've",
    "hadn'tve": "hadn't've",
    "hasnt": "hasn't",
    "havent": "haven't",
    "hed": "he'd",
    "hed've": "he'd've",
    "he'dve": "he'd've",
    "hes": "he's",
    "howd": "how'd",
    "howll": "how'll",
    "hows": "how's",
    "Id've": "I'd've",
    "I'dve": "I'd've",
    "Im": "I'm",
    "Ive": "I've",
    "isnt": "isn't",
    "itd": "it'd",
    "itd've": "it'd've",
    "it'dve": "it'd've",
    "itll": "it'll",
    "let's": "let's",
    "maam": "ma'am",
    "mightnt": "mightn't",
    "mightnt've": "mightn't've",
    "mightn'tve": "mightn't've",
    "mightve": "might've",
    "mustnt": "mustn't",
    "mustve": "must've",
    "neednt": "needn't",
    "notve": "not've",
    "oclock": "o'clock",
    "oughtnt": "oughtn't",
    "ow's'at": "'ow's'at",
    "'ows'at": "'ow's'at",
    "'ow'sat": "'ow's'at",
    "shant": "shan't",
    "shed've": "she'd've",
    "she'dve": "she'd've",
    "she's": "she's",
    "shouldve": "should've",
    "shouldnt": "shouldn't",
    "shouldnt've": "shouldn't've",
    "shouldn'tve": "shouldn't've",
    "somebody'd": "somebodyd",
    "somebodyd've": "somebody'd've",
    "somebody'dve": "somebody'd've",
    "somebodyll": "somebody'll",
    "somebodys": "somebody's",
    "someoned": "someone'd",
    "someoned've": "someone'd've",
    "someone'dve": "someone'd've",
    "someonell": "someone'll",
    "someones": "someone's",
    "somethingd": "something'd",
    "somethingd've": "something'd've",
    "something'dve": "something'd've",
    "somethingll": "something'll",
    "thats": "that's",
    "thered": "there'd",
    "thered've": "there'd've",
    "there'dve": "there'd've",
    "therere": "there're",
    "theres": "there's",
    "theyd": "they'd",
    "theyd've": "they'd've",
    "they'dve": "they'd've",
    "theyll": "they'll",
    "theyre": "they're",
    "theyve": "they've",
    "twas": "'twas",
    "wasnt": "wasn't",
    "wed've": "we'd've",
    "we'dve": "we'd've",
    "weve": "we've",
    "werent": "weren't",
    "whatll": "what'll",
    "whatre": "what're",
    "whats": "what's",
    "whatve": "what've",
    "whens": "when's",
    "whered": "where'd",
    "wheres": "where's",
    "whereve": "where've",
    "whod": "who'd",
    "whod've": "who'd've",
    "who'dve": "who'd've",
    "wholl": "who'll",
    "whos": "who's",
    "whove": "who've",
    "whyll": "why'll",
    "whyre": "why're",
    "whys": "why's",
    "wont": "won't",
    "wouldve": "would've",
    "wouldnt": "wouldn't",
    "wouldnt've": "wouldn't've",
    "wouldn'tve": "wouldn't've",
    "yall": "y'all",
    "yall'll": "y'all'll",
    "y'allll": "y'all'll",
    "yall'd've": "y'all'd've",
    "y'alld've": "y'all'd've",
    "y'all'dve": "y'all'd've",
    "youd": "you'd",
    "youd've": "you'd've",
    "you'dve": "you'd've",
    "youll": "you'll",
    "youre": "you're",
    "youve": "you've",
}
VQA_RULES = ("official", "lenient")


def vqa_punctuation(text: str) -> str:
    """The official ``processPunctuation``: a listed mark next to a space (or any listed mark, when a
    comma sits between digits: "1,000") is dropped, otherwise it becomes a space ("t-shirt" ->
    "t shirt"); then full stops not before a digit are dropped."""
    out = text
    digits_comma = _COMMA_BETWEEN_DIGITS.search(text) is not None
    for p in _OFFICIAL_PUNCT:
        out = out.replace(p, "" if (p + " " in text or " " + p in text or digits_comma) else " ")
    return _PERIOD.sub("", out, count=32)


def _digit_article(text: str) -> str:
    """The official ``processDigitArticle``: lower case, number words to digits, articles dropped,
    contractions restored."""
    # Python 2's unicode.lower() maps "İ" to "i"; Python 3 adds a combining dot.
    words = [_MANUAL_MAP.get(w, w) for w in text.replace("\u0130", "i").lower().split()]
    return " ".join(_CONTRACTIONS.get(w, w) for w in words if w not in _ARTICLES)


def _strip(answer: str) -> str:
    return answer.replace("\n", " ").replace("\t", " ").strip()


def normalize_vqa(answer: str) -> str:
    """The official full normalisation (applied to both sides when the references differ): newlines
    and tabs to spaces, outer spaces stripped, :func:`vqa_punctuation`, then digits, articles and
    contractions."""
    return _digit_article(vqa_punctuation(_strip(answer)))


def vqa_accuracy(
    predictions: Sequence[str], references: Sequence[Sequence[str]], rule: str = "official"
) -> list[float]:
    """VQA accuracy as the official ``vqaEval.py`` computes it: both sides stripped; when the stripped
    references are not all the same, both normalised (:func:`normalize_vqa`), otherwise compared as
    they are (so "Yes" scores 0 against ten "yes"); then, for each reference left out in turn,
    min(1, matches among the others / 3), averaged. With fewer than 4 references this cannot reach 1
    (one reference always gives 0), exactly as the official code behaves.

    ``rule="lenient"`` is our reading for datasets with few references: both sides always normalised,
    the threshold min(3, n - 1), a single reference scored by exact match."""
    if rule not in VQA_RULES:
        raise ValueError(f"vqa_accuracy: rule={rule!r}; choose one of {VQA_RULES}")
    _check(predictions, references, "vqa_accuracy")
    out = []
    for p, refs in zip(predictions, references):
        if rule == "lenient":
            res, gts = normalize_vqa(p), [normalize_vqa(r) for r in refs]
            if len(gts) == 1:
                out.append(float(res == gts[0]))
                continue
            need = min(3, len(gts) - 1)
        else:
            res, gts = _strip(p), [_strip(r) for r in refs]
            if len(set(gts)) > 1:
                res, gts = normalize_vqa(res), [normalize_vqa(g) for g in gts]
            need = 3
        # Leave-one-out by position: the script drops the answer dict equal to the one left out, and
        # real annotations' dicts differ by answer_id, so exactly one goes.
        accs = [
            min(1.0, sum(g == res for j, g in enumerate(gts) if j != i) / need)
            for i in range(len(gts))
        ]
        out.append(sum(accs) / len(accs))
    return out


def exact_match(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> list[float]:
    """1 when the normalised prediction equals one normalised reference (VQA normalisation, both sides)."""
    _check(predictions, references, "exact_match")
    return [
        float(normalize_vqa(p) in {normalize_vqa(r) for r in refs})
        for p, refs in zip(predictions, references)
    ]
