"""Topics of texts for stage 07: BERTopic with MiniLM embeddings, a seeded UMAP and HDBSCAN
(:func:`topics`), fed only texts that read as words (:func:`readable_texts`: a tiny model's noise is
left out), named by dictionary words only (:func:`dictionary_words`), and labelled by any LLM
backend when one is given (:func:`label_topics`). Fixed seeds: the same texts give the same topics.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pandas as pd
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from lib.metrics.wordnet import ensure_wordnet
from lib.models import Request, generate
from lib.models.tiny import sentence_encoder
from lib.pages.maps import umap_module

# --- readable texts -------------------------------------------------------------------------------

_LETTERS = re.compile(r"[a-z]+")
MIN_WORD_SHARE = 0.5  # a readable text: at least this share of its letter runs are dictionary words


@cache
def _is_word(token: str) -> bool:
    """WordNet knows it, inflections included (asked once per distinct token)."""
    return ensure_wordnet().morphy(token) is not None


def dictionary_words(text: str) -> list[str]:
    """The text's English words (:func:`_is_word`) of 2+ letters, stop words left out: what a topic
    may be named by. A garbled run such as "rddddddddhow" is none."""
    return [
        t
        for t in _LETTERS.findall(text.lower())
        if len(t) > 1 and t not in ENGLISH_STOP_WORDS and _is_word(t)
    ]


def readable_texts(texts) -> tuple[list[str], int]:
    """``(readable, left out)``: texts whose letter runs are mostly words (:data:`MIN_WORD_SHARE`)
    and hold at least one word beyond stop words; the rest (a tiny model's noise) is counted."""
    keep = []
    for text in map(str, texts):
        runs = [t for t in _LETTERS.findall(text.lower()) if len(t) > 1]
        words = dictionary_words(text)
        known = len(words) + sum(t in ENGLISH_STOP_WORDS for t in runs)
        if words and known >= MIN_WORD_SHARE * len(runs):
            keep.append(text)
    return keep, len(texts) - len(keep)


def topics(texts, seed: int = 0, min_topic_size: int = 5, embeddings: np.ndarray | None = None):
    """BERTopic with MiniLM embeddings, a seeded UMAP and HDBSCAN: ``(topic_info, per-text topic ids)``.
    ``topic_info`` has Topic, Count, Name and the representative words; topic -1 is BERTopic's outliers.
    Topics are named by :func:`dictionary_words` only, so a name is made of words of its texts."""
    from bertopic import BERTopic
    from hdbscan import HDBSCAN
    from sklearn.feature_extraction.text import CountVectorizer

    texts = [str(t) for t in texts]
    if len(texts) < 2 * min_topic_size:
        raise ValueError(
            f"BERTopic needs at least {2 * min_topic_size} texts for topics of >= {min_topic_size}, "
            f"got {len(texts)}"
        )
    encoder = sentence_encoder()
    if embeddings is None:
        embeddings = encoder.encode(texts, normalize_embeddings=True, show_progress_bar=False)
    model = BERTopic(
        embedding_model=encoder,
        umap_model=umap_module().UMAP(
            n_neighbors=max(2, min(15, len(texts) - 1)),
            n_components=5,
            min_dist=0.0,
            metric="cosine",
            random_state=seed,
        ),
        hdbscan_model=HDBSCAN(
            min_cluster_size=min_topic_size,
            metric="euclidean",
            cluster_selection_method="eom",
            prediction_data=True,
        ),
        vectorizer_model=CountVectorizer(analyzer=dictionary_words, min_df=1),
        min_topic_size=min_topic_size,
        calculate_probabilities=False,
    )
    ids, _ = model.fit_transform(texts, embeddings)
    info = model.get_topic_info()
    words = [[w for w, _ in (model.get_topic(t) or []) if w.strip()][:8] for t in info["Topic"]]
    # BERTopic pads short topics with empty words: dropped
    info["Words"] = [", ".join(w) for w in words]
    info["Name"] = [f"{t}_" + "_".join(w[:3]) for t, w in zip(info["Topic"], words)]
    return info[["Topic", "Count", "Name", "Words"]], list(ids)


def label_topics(model, info: pd.DataFrame, max_new_tokens: int, store=None) -> list[str]:
    """A short label per topic written by any LLM backend from its representative words (at most
    ``max_new_tokens``: ``AnalyzeConfig.topic_label_max_new_tokens``)."""
    reqs = [
        Request.simple(
            f"Give a short label (at most five words) for a topic described by these words: {w}.",
            max_new_tokens=max_new_tokens,
        )
        for w in info["Words"]
    ]
    return [
        r.text.strip().splitlines()[0] if r.text.strip() else ""
        for r in generate(model, reqs, store=store, progress=False)
    ]
