"""Rule-based distractors of MemeQA's annotation-driven types (no LLM), from the annotations of
the whole set (the *pool*). Each type's ``distractors`` in ``lib/data/prompts/af.yaml`` names its
rule in :data:`RULES`, and its ``option`` template words what the rule writes:

- ``other_targets`` (``tar_id``): other memes' targets (the paraphrase guard drops those in the
  target's synonym group: MiniLM similarity above the threshold);
- ``other_sentiments_then_targets`` (``tar_sent_id``): a true target with a sentiment it does not
  have first (as the original mixes them), then another meme's target;
- ``opposite_actions_then_targets`` / ``opposite_actions`` (``tar_act_id`` / ``cond_act_id``):
  actions of the opposite sentiment (``af.yaml`` ``actions``) on the true target first, for
  ``tar_act_id`` then the true action applied to another target; never an action of the correct
  action's own sentiment (a synonym - "criticizes" / "ridicules" - would be a second right
  answer); an unknown sentiment is read off the correct action;
- ``other_sentiments`` (``cond_sent_id``): the other two sentiments (fixed options: the question
  cannot be regenerated).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from lib.af.skeletons import Skeleton, option, prompts
from lib.core.schema import SENTIMENTS

OPPOSITE = {
    "positive": ("negative",),
    "negative": ("positive",),
    "neutral": ("positive", "negative"),
}


@dataclass
class Pool:
    targets: list[str] = field(default_factory=list)

    @classmethod
    def from_skeletons(cls, skeletons: list[Skeleton]) -> Pool:
        names = []
        for s in skeletons:
            for t in s.meta.get("targets", []) or []:
                if t.get("target") and t["target"] not in names:
                    names.append(t["target"])
            if s.type == "tar_id":
                names += [c for c in s.correct if c not in names]
        return cls(targets=names)


def _actions(sentiments) -> list[str]:
    table = prompts()["actions"]
    return [a for s in sentiments for a in table[s]]


def sentiment_of(action: str) -> str | None:
    """The sentiment whose action list holds ``action`` (None for an action outside the lists)."""
    return next((s for s, acts in prompts()["actions"].items() if action in acts), None)


def _opposite_actions(sentiment: str | None, action: str | None) -> list[str]:
    """The actions of the other sentiment(s); an unknown sentiment is read off the correct action,
    and when that is unknown too every action list is a candidate."""
    sentiment = sentiment or sentiment_of(action or "")
    return _actions(OPPOSITE.get(sentiment, SENTIMENTS))


@dataclass
class Draw:
    """One question's rule draw: the skeleton, how many to keep, what may not be offered, the RNG."""

    sk: dict
    n: int
    forbidden: list[str]
    pool: Pool
    rng: np.random.Generator

    @cached_property
    def targets(self) -> list[dict]:
        return self.sk["meta"].get("targets", [])

    @cached_property
    def others(self) -> list[str]:
        """Other memes' targets: neither a correct option nor one of this meme's targets."""
        mine = {x.get("target") for x in self.targets}
        return [t for t in self.pool.targets if t not in self.sk["correct"] and t not in mine]

    def word(self, **slots: str) -> str:
        return option(self.sk["type"], **slots)

    def ranked(self, own: list[str], rest: list[str]) -> list[str]:
        """Up to ``2n`` candidates (the guards then keep ``n``): those about the meme's own targets
        first, then the rest, each group shuffled with the RNG."""
        out: list[str] = []
        for group in (own, rest):
            group = [
                c
                for c in dict.fromkeys(group)
                if c not in self.forbidden and c not in self.sk["correct"] and c not in out
            ]
            out += [group[i] for i in self.rng.permutation(len(group))]
        return out[: 2 * self.n]


def _other_targets(d: Draw) -> list[str]:
    return d.ranked([], [d.word(target=o) for o in d.others])


def _other_sentiments_then_targets(d: Draw) -> list[str]:
    own = [
        d.word(sentiment=s, target=t["target"])
        for t in d.targets
        for s in SENTIMENTS
        if s != t.get("sentiment")
    ]
    rest = [
        d.word(sentiment=t.get("sentiment", "negative"), target=o)
        for t in d.targets
        for o in d.others
    ]
    return d.ranked(own, rest)


def _opposite_actions_then_targets(d: Draw) -> list[str]:
    own = [
        d.word(action=a, target=t["target"])
        for t in d.targets
        for a in _opposite_actions(t.get("sentiment"), t.get("action"))
    ]
    rest = [d.word(action=t["action"], target=o) for t in d.targets for o in d.others]
    return d.ranked(own, rest)


def _opposite_actions_alone(d: Draw) -> list[str]:
    correct = d.sk["correct"]
    return d.ranked(
        [
            d.word(action=a)
            for a in _opposite_actions(
                d.sk["meta"].get("sentiment"), correct[0] if correct else None
            )
        ],
        [],
    )


def _other_sentiments(d: Draw) -> list[str]:
    """Fixed options: every other sentiment, in order, with no draw."""
    return [w for w in (d.word(sentiment=s) for s in SENTIMENTS) if w not in d.sk["correct"]]


# the rules af.yaml's `distractors` names
RULES = {
    "other_targets": _other_targets,
    "other_sentiments_then_targets": _other_sentiments_then_targets,
    "opposite_actions_then_targets": _opposite_actions_then_targets,
    "opposite_actions": _opposite_actions_alone,
    "other_sentiments": _other_sentiments,
}


def distractors(sk: dict, n: int, forbidden: list[str], pool: Pool, rng) -> list[str]:
    """Up to ``2n`` candidates (the guards then keep ``n``), drawn with ``rng`` by the type's rule:
    the candidates about the meme's own targets first, then those about other memes' targets."""
    rule = RULES.get(prompts()["types"].get(sk["type"], {}).get("distractors"))
    if rule is None:
        raise ValueError(f"no rule-based distractors for type {sk['type']!r}")
    return rule(Draw(sk, n, forbidden, pool, rng))
