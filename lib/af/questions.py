"""A question under adversarial filtering: its state (:class:`QState`), its options assembled from
the correct ones and the distractors of an iteration, its None+ twin, and the item it is shown as."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from lib.af.configuration import AFConfig
from lib.af.skeletons import prompts
from lib.core.schema import Item
from lib.tasks.registry import af_questions


def seeded_rng(*parts) -> np.random.Generator:
    """A generator seeded by ``parts`` (the run's seed, a question, an iteration, ...): the same draws
    on every machine and in every resumed run."""
    return np.random.default_rng(
        int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:12], 16)
    )


@dataclass
class QState:
    skeleton: dict
    status: str = "active"  # active | accepted | never_fooled | blind_dropped
    options: list = field(default_factory=list)
    origins: list = field(default_factory=list)
    answer: list = field(default_factory=list)
    history: list = field(default_factory=list)  # distractors written, per iteration
    accepted_iteration: int | None = None
    last_answers: dict = field(default_factory=dict)


def _correct(sk: dict, cfg: AFConfig) -> list[str]:
    """The correct options a question shows: all of them, or - when there are more than
    ``n_options - 1`` - that many, drawn once per question, so every question keeps its option count."""
    correct = list(sk["correct"])
    room = max(1, cfg.n_options - 1)
    if len(correct) <= room:
        return correct
    keep = sorted(seeded_rng(cfg.seed, sk["id"], 0).choice(len(correct), size=room, replace=False))
    return [correct[i] for i in keep]


def none_plus(
    options: list[str], correct: list[bool], removed: int, nota: str | None = None
) -> tuple[list[str], list[bool]]:
    """A released None- question as its None+ twin: option ``removed`` dropped, the others kept in
    order, "None of the above" appended (at D), correct exactly when no correct option is left."""
    nota = nota or prompts()["none_of_the_above"]
    opts = [o for i, o in enumerate(options) if i != removed]
    flags = [c for i, c in enumerate(correct) if i != removed]
    return opts + [nota], flags + [not any(flags)]


def assemble(q: QState, distractors: list[str], cfg: AFConfig, iteration: int, origin: str) -> None:
    """Options = correct + distractors, shuffled by a seed derived from (seed, question, iteration)
    so answer positions are balanced. The release filtered the None- form (no "None of the above";
    its None+ twin is derived from the result afterwards, :func:`plus_variant`); ``nota_position``
    "last" / "random" instead filter with an extra, never-correct NOTA at D / anywhere."""
    sk = q.skeleton
    opts = [(c, "correct") for c in _correct(sk, cfg)] + [(d, origin) for d in distractors]
    rng = seeded_rng(cfg.seed, sk["id"], iteration)
    opts = [opts[i] for i in rng.permutation(len(opts))]
    if cfg.none_of_the_above and sk["type"] != "cond_sent_id" and cfg.nota_position != "release":
        nota = (prompts()["none_of_the_above"], "none_of_the_above")
        pos = len(opts) if cfg.nota_position == "last" else int(rng.integers(0, len(opts) + 1))
        opts.insert(pos, nota)
    q.options = [o for o, _ in opts]
    q.origins = [g for _, g in opts]
    q.answer = [i for i, g in enumerate(q.origins) if g == "correct"]


def plus_variant(item: Item, seed: int) -> Item:
    """The None+ twin of a filtered None- question, as the release derives it (:func:`none_plus`):
    one option removed (drawn with ``seed`` per question), the others kept in order, NOTA at D and
    correct exactly when no correct option is left. Conditional sentiment keeps its three options."""
    if item.meta.get("type") == "cond_sent_id":
        return Item(
            id=item.id,
            task=item.task,
            question=item.question,
            images=list(item.images),
            options=list(item.options),
            answer=list(item.answer),
            meta=dict(item.meta, variant="none-plus"),
        )
    flags = [i in item.answer for i in range(len(item.options))]
    removed = int(seeded_rng(seed, item.id, "none_plus").integers(0, len(item.options)))
    options, flags = none_plus(item.options, flags, removed)
    meta = dict(item.meta, variant="none-plus", removed_option=item.options[removed])
    for key in (
        "discriminator_answers",
        "blind_answerable",
    ):  # answers to the None- options, not these
        meta.pop(key, None)
    if "origins" in meta:
        origins = [g for i, g in enumerate(meta["origins"]) if i != removed]
        meta["origins"] = origins + ["correct" if flags[-1] else "none_of_the_above"]
    return Item(
        id=item.id,
        task=item.task,
        question=item.question,
        images=list(item.images),
        options=options,
        answer=[i for i, f in enumerate(flags) if f],
        meta=meta,
    )


def n_distractors(sk: dict, cfg: AFConfig) -> int:
    """Distractors per question: the release's 4 - #correct (its None+ twin replaces one option by
    NOTA afterwards; an extra NOTA during filtering takes one more place)."""
    if sk["type"] == "cond_sent_id":
        return 2  # positive / neutral / negative: the other two
    extra = 1 if cfg.none_of_the_above and cfg.nota_position != "release" else 0
    return max(1, cfg.n_options - len(_correct(sk, cfg)) - extra)


def as_item(q: QState) -> Item:
    """The question as it stands, as a multiple-choice item (single / multi as the skeleton says, else
    as its number of answers)."""
    sk = q.skeleton
    return af_questions().make_item(
        sk["id"],
        list(sk["images"]),
        sk["question"],
        q.answer,
        list(q.options),
        general_type=sk.get("general_type"),
        specific_type=prompts()["specific_types"][sk["type"]],
        meta={"type": sk["type"]},
    )
