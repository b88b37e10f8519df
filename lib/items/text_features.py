"""What a blind reader sees of a question: its text as features, and the folds it is scored in.

- :func:`surface_features`: per option, the rule-based audit's tells (:func:`lib.metrics.shortcuts.fires`:
  shortest, longest, capitalisation, final stop, placeholder) and a few more surface properties
  (length rank and ratio, words, overlap with the question, position), one column each
  (:data:`SURFACE`).
- :class:`NGrams`: word (1-2) and character (2-4, inside word boundaries) n-grams, counted once over
  every text and weighted per fold (TF-IDF from the training rows alone, each block L2-normalised),
  so a held-out text never shapes the vocabulary or the weights it is read with, and the texts are
  tokenised once instead of once per fold.
- :func:`image_folds`: k folds grouped by image, so questions about one image never straddle one.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer
from sklearn.model_selection import GroupKFold

from lib.metrics.shortcuts import TELLS, fires

SURFACE = (
    *(f"tell_{t}" for t in TELLS),
    "length_rank",  # 0 for the shortest option, 1 for the longest
    "log_length_ratio",  # log length over the item's mean log length
    "words",
    "question_overlap",  # share of the option's words that the question holds
    "position",  # 0 for the first option, 1 for the last
    "first",
    "last",
)
WORD_NGRAMS, CHAR_NGRAMS = (1, 2), (2, 4)
# an n-gram seen in fewer training texts than this is noise to a linear model: characters need more
WORD_MIN_DF, CHAR_MIN_DF = 2, 3


def surface_features(options: list[str], question: str) -> np.ndarray:
    """One row per option, one column per :data:`SURFACE` name."""
    n = len(options)
    lengths = np.array([len(o) for o in options], dtype=float)
    log_len = np.log1p(lengths)
    order = np.argsort(np.argsort(lengths, kind="stable"), kind="stable")
    said = set(question.lower().split())
    rows = []
    for k, option in enumerate(options):
        tells = [float(fires(t, options) == k) for t in TELLS]
        words = option.lower().split()
        overlap = sum(w in said for w in words) / max(1, len(words))
        rows.append(
            [
                *tells,
                order[k] / (n - 1),
                log_len[k] - log_len.mean(),
                len(words),
                overlap,
                k / (n - 1),
                float(k == 0),
                float(k == n - 1),
            ]
        )
    return np.asarray(rows)


def standardised(train: np.ndarray, test: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Dense columns scaled by the training rows' mean and spread (a linear model's solver converges
    far sooner on unit-scale columns), as sparse blocks to stack beside the n-grams."""
    mean, std = train.mean(axis=0), train.std(axis=0)
    std[std == 0] = 1.0
    return sp.csr_matrix((train - mean) / std), sp.csr_matrix((test - mean) / std)


class NGrams:
    """Word and character n-gram counts of ``texts`` (one row each), TF-IDF-weighted per fold."""

    def __init__(self, texts: list[str]):
        words = CountVectorizer(ngram_range=WORD_NGRAMS, token_pattern=r"(?u)\b\w+\b")
        chars = CountVectorizer(analyzer="char_wb", ngram_range=CHAR_NGRAMS)
        self.blocks = [
            (words.fit_transform(texts).tocsc(), WORD_MIN_DF),
            (chars.fit_transform(texts).tocsc(), CHAR_MIN_DF),
        ]

    def fold(self, train: np.ndarray, test: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """(training rows, test rows): the n-grams frequent enough in the training rows, weighted by
        their inverse document frequency there."""
        out_train, out_test = [], []
        for counts, min_df in self.blocks:
            seen = counts[train]
            keep = np.flatnonzero(np.asarray((seen > 0).sum(axis=0)).ravel() >= min_df)
            tfidf = TfidfTransformer(sublinear_tf=True).fit(seen[:, keep])
            out_train.append(tfidf.transform(seen[:, keep]))
            out_test.append(tfidf.transform(counts[test][:, keep]))
        return sp.hstack(out_train).tocsr(), sp.hstack(out_test).tocsr()


def image_folds(groups: list[str], folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) item indices of ``folds`` folds grouped by ``groups`` (each item's image),
    fewer when there are fewer images; none when there is one image (nothing to hold out)."""
    n_groups = len(set(groups))
    if n_groups < 2:
        return []
    split = GroupKFold(n_splits=min(folds, n_groups), shuffle=True, random_state=seed)
    index = np.arange(len(groups))
    return list(split.split(index, groups=groups))
