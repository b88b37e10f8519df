"""Metrics usable from a notebook: each takes plain lists (predictions, references) and returns
per-item scores or a number, so any subset can be scored and bootstrapped.

- :mod:`lib.metrics.classification` - accuracy, binary / macro F1, multiple-choice exact-set and
  Jaccard credit with per-type micro / macro averages.
- :mod:`lib.metrics.text` - BLEU (sacrebleu), ROUGE-L (rouge-score), METEOR (NLTK + WordNet),
  CIDEr (pycocoevalcap), BERTScore (bert-score), ANLS, VQA accuracy, exact match.
- :mod:`lib.metrics.shortcuts` - the shortcut audit of any multiple-choice dataset (text-only tells
  and a blind baseline built from them, beside chance).
- :mod:`lib.metrics.stats` - bootstrap confidence intervals, over questions or over clusters (images).
- :mod:`lib.metrics.rater_agreement` - how well a scorer agrees with people (ROC AUC, Kendall tau-b, Cohen's
  kappa, Krippendorff's alpha), each with a clustered interval, and two scorers compared.

A family's own metrics are in its folder: the LAVE judge (:mod:`lib.families.lave.judge`), the
Scrapbook protocol (:mod:`lib.families.scrapbook.consistency`, its group rules in
:mod:`lib.families.scrapbook.coded`).
"""

from lib.metrics.classification import accuracy, binary_f1, jaccard, macro_f1, mcq_scores, per_type
from lib.metrics.stats import bootstrap_ci, mean_ci
from lib.metrics.text import (
    anls,
    bertscore,
    bleu,
    cider,
    exact_match,
    meteor,
    rouge_l,
    vqa_accuracy,
)

__all__ = [
    "accuracy",
    "anls",
    "bertscore",
    "binary_f1",
    "bleu",
    "bootstrap_ci",
    "cider",
    "exact_match",
    "jaccard",
    "macro_f1",
    "mcq_scores",
    "mean_ci",
    "meteor",
    "per_type",
    "rouge_l",
    "vqa_accuracy",
]
