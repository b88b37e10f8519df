"""Validation and the held-out comparison: questions asked with each task's own request (greedy,
constrained only where the task has a closed answer set), read and scored by the evaluation
engine (:func:`lib.eval.score.read_answer`, :func:`lib.eval.score.score_group`: stage 06's
reading and scoring), then accuracies overall, per question type and per type and target kind;
the metric that picks ``best/``, and the two lines a trained model must rise above: the majority
answer (the answer prior) and the model asked about a blank image (the blind answer: what the
question alone gives away), each held to by a paired interval over clusters (:func:`margins`)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
from PIL import Image

from lib.core.schema import Prediction
from lib.eval.paired import paired_difference
from lib.eval.score import read_answer, score_group
from lib.metrics.stats import N_RESAMPLES
from lib.models import generate
from lib.models.hf import HFModel
from lib.tasks import Scoring
from lib.tasks.registry import get_task, task_of
from lib.training.data import Example
from lib.training.plan import TrainSettings


def validation_sample(cfg: TrainSettings, val: list[Example]) -> list[Example]:
    """The ``eval_items`` validation questions every validation asks (seeded, in split order)."""
    rng_val = np.random.default_rng(cfg.seed)
    return [val[i] for i in sorted(rng_val.permutation(len(val))[: cfg.eval_items])]


def evaluate_examples(
    model,
    processor,
    examples: list[Example],
    max_new_tokens: int,
    batch_size: int = 32,
    question_first: bool = False,
    spec: dict | None = None,
) -> dict:
    """Accuracy per type, with each task's own request, answer reading and scoring - what stage 06
    does (greedy; constrained only where the task has a closed answer set). ``spec``: the model's
    spec, for its prompt_format."""
    responses = ask_examples(
        model, processor, examples, max_new_tokens, batch_size, question_first, spec
    )
    return accuracies(examples, score_examples(examples, responses))


def ask_examples(
    model,
    processor,
    examples: list[Example],
    max_new_tokens: int,
    batch_size: int = 32,
    question_first: bool = False,
    spec: dict | None = None,
) -> list:
    """The model's responses to ``examples``, asked as :func:`evaluate_examples` asks them."""
    keep = {k: v for k, v in (spec or {}).items() if k == "prompt_format"}
    wrapper = HFModel.from_loaded(
        model, processor, {"backend": "hf", "name": "in-training", **keep}
    )
    was_training = model.training
    model.eval()
    try:
        reqs = [
            task_of(e.item).request(
                e.item, e.root, question_first=question_first, max_new_tokens=max_new_tokens
            )
            for e in examples
        ]
        responses = generate(wrapper, reqs, batch_size=batch_size, progress=False)
    finally:
        model.train(was_training)
    return list(responses)


def score_examples(examples: list[Example], responses) -> list[bool]:
    """Is each response right, read and scored as stage 06 reads and scores it (the engine's
    :func:`lib.eval.score.read_answer` and :func:`lib.eval.score.score_group`, per task)?"""
    preds = [
        Prediction(
            item_id=e.item.id,
            model="validation",
            task=e.item.task,
            raw=resp.text,
            **read_answer(task_of(e.item), e.item, resp),
        )
        for e, resp in zip(examples, responses)
    ]
    by_task: dict[str, list[int]] = {}
    for i, e in enumerate(examples):
        by_task.setdefault(e.item.task, []).append(i)
    for name, idx in by_task.items():
        group = [preds[i] for i in idx]
        score_group(get_task(name), group, [examples[i].item for i in idx], Scoring())
        for i, p in zip(idx, group):
            preds[i] = p
    return [bool(p.correct) for p in preds]


def _group_keys(e: Example) -> list[str]:
    """The accuracies an example counts in: overall, its question type, and its type and target
    (its ``target`` facet, where its task gives one: Scrapbook's colour / shape)."""
    kind = e.question_type
    keys = ["accuracy", f"accuracy_{kind}"]
    if "target" in e.facets:
        keys.append(f"accuracy_{kind}_{e.facets['target']}")
    return keys


def group_sizes(examples: list[Example]) -> dict[str, int]:
    """How many questions each accuracy of :func:`accuracies` is over."""
    return dict(sorted(Counter(k for e in examples for k in _group_keys(e)).items()))


def accuracies(examples: list[Example], hits: list[bool]) -> dict:
    """Overall accuracy, per question type, per type and target kind (:func:`_group_keys`), and
    ``macro``: the mean of the per-type accuracies (MemeQA's headline, exact match)."""
    groups: dict[str, list[bool]] = {"accuracy": []}
    per_type: dict[str, list[bool]] = {}
    for e, hit in zip(examples, hits):
        per_type.setdefault(e.question_type, []).append(hit)
        for key in _group_keys(e):
            groups.setdefault(key, []).append(hit)
    out = {k: float(np.mean(v)) for k, v in sorted(groups.items()) if v}
    if per_type:
        out["macro"] = float(np.mean([np.mean(v) for v in per_type.values()]))
    return out


def selection_metric(cfg: TrainSettings, examples: list[Example]) -> str:
    """The validation metric that picks ``best/`` (see ``TrainConfig.select_by``)."""
    if cfg.select_by != "auto":
        return cfg.select_by
    wanted = {task_of(e.item).validation_metric for e in examples}
    return (
        wanted.pop() if len(wanted) == 1 else "accuracy"
    )  # tasks that disagree: the micro average


def majority_hits(train: list[Example], test: list[Example]) -> list[bool]:
    """Is the training split's most frequent answer for each test question's type its answer?"""
    top = {}
    for kind in {e.question_type for e in test}:
        answers = sorted(e.answer for e in train if e.question_type == kind)
        top[kind] = max(set(answers), key=lambda a: (answers.count(a), a)) if answers else None
    return [e.answer == top[e.question_type] for e in test]


def majority_baseline(train: list[Example], test: list[Example]) -> dict:
    """Accuracy of always giving the training split's most frequent answer for the question type."""
    return accuracies(test, majority_hits(train, test))


BLANK = (128, 128, 128)  # the blind baseline's picture: mid-grey, no object, colour, count or place


def blank_examples(examples: list[Example], folder: str | Path) -> list[Example]:
    """``examples`` asked about blank pictures: each of their images replaced by a :data:`BLANK`
    one of the same size and name under ``folder`` (one subfolder per dataset folder, so names
    never collide). What a model answers about them is what the question alone tells it."""
    folder = Path(folder)
    roots = {root: folder / str(k) for k, root in enumerate(sorted({e.root for e in examples}))}
    for e in examples:
        for name in e.item.images:
            blank = roots[e.root] / name
            if not blank.exists():
                with Image.open(Path(e.root) / name) as im:
                    size = im.size
                blank.parent.mkdir(parents=True, exist_ok=True)
                Image.new("RGB", size, BLANK).save(blank)
    return [Example(e.item, str(roots[e.root])) for e in examples]


def margins(
    hits: dict[str, list[bool]],
    examples: list[Example],
    system: str = "trained",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> list[dict]:
    """Per question type and per other system of ``hits`` (the majority answer, the blind model...):
    ``system``'s accuracy minus that one's on the same questions, with its paired interval over the
    questions' clusters (:meth:`Task.cluster`: an image's questions move together, in both at once;
    :func:`lib.eval.paired.paired_difference`; no bounds, ``None``, over fewer than two)."""
    kinds = np.array([e.question_type for e in examples], dtype=object)
    clusters = np.array([str(task_of(e.item).cluster(e.item)) for e in examples])

    def bound(x: float) -> float | None:  # JSON has no NaN
        return None if math.isnan(x) else round(x, 4)

    rows = []
    for kind in sorted(set(kinds)):
        at = kinds == kind
        for other in (name for name in hits if name != system):
            diff, low, high = paired_difference(
                np.asarray(hits[other], float)[at],
                np.asarray(hits[system], float)[at],
                n_resamples=n_resamples,
                seed=seed,
                clusters=clusters[at],
            )
            rows.append(
                {
                    "type": kind,
                    "over": other,
                    "margin": round(diff, 4),
                    "ci_low": bound(low),
                    "ci_high": bound(high),
                    "n": int(at.sum()),
                    "n_clusters": len(set(clusters[at])),
                }
            )
    return rows
