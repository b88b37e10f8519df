"""Rule-based distractors of MemeQA's annotation-driven types (no LLM), from the annotations of
the whole set (the *pool*):

- ``tar_id``: other memes' targets (the paraphrase guard drops those in the target's synonym group:
  MiniLM similarity above the threshold);
- ``tar_sent_id``: a true target with a sentiment it does not have first (as the original mixes
  them), then another meme's target;
- ``tar_act_id`` / ``cond_act_id``: actions of the opposite sentiment (``lib/data/prompts/af.yaml``)
  on the true target first, for ``tar_act_id`` then the true action applied to another target; never
  an action of the correct action's own sentiment (a synonym - "criticizes" / "ridicules" - would be a
  second right answer); an unknown sentiment is read off the correct action;
- ``cond_sent_id``: the other two sentiments (fixed options: the question cannot be regenerated).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lib.af.skeletons import Skeleton, prompts
from lib.schema import SENTIMENTS

OPPOSITE = {"positive": ("negative",), "negative": ("positive",), "neutral": ("positive", "negative")}


@dataclass
class Pool:
    targets: list[str] = field(default_factory=list)

    @classmethod
    def from_skeletons(cls, skeletons: list[Skeleton]) -> "Pool":
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


def distractors(sk: dict, n: int, forbidden: list[str], pool: Pool, rng) -> list[str]:
    """Up to ``2n`` candidates (the guards then keep ``n``), drawn with ``rng``: the candidates about
    the meme's own targets first, then those about other memes' targets."""
    kind, meta, correct = sk["type"], sk["meta"], sk["correct"]
    targets = meta.get("targets", [])
    others = [t for t in pool.targets if t not in correct and t not in {x.get("target") for x in targets}]
    if kind == "cond_sent_id":
        return [s.capitalize() for s in SENTIMENTS if s.capitalize() not in correct]
    own: list[str] = []
    if kind == "tar_id":
        rest = others
    elif kind == "tar_sent_id":
        own = [f"The meme is {s} towards {t['target']}" for t in targets for s in SENTIMENTS if s != t.get("sentiment")]
        rest = [f"The meme is {t.get('sentiment', 'negative')} towards {o}" for t in targets for o in others]
    elif kind == "tar_act_id":
        own = [f"The meme {a} {t['target']}" for t in targets for a in _opposite_actions(t.get("sentiment"), t.get("action"))]
        rest = [f"The meme {t['action']} {o}" for t in targets for o in others]
    elif kind == "cond_act_id":
        own, rest = _opposite_actions(meta.get("sentiment"), correct[0] if correct else None), []
    else:
        raise ValueError(f"no rule-based distractors for type {kind!r}")
    out = []
    for group in (own, rest):
        group = [c for c in dict.fromkeys(group) if c not in forbidden and c not in correct and c not in out]
        out += [group[i] for i in rng.permutation(len(group))]
    return out[:2 * n]
