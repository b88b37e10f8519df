"""The blind gate: beside the discriminators' verdict, a text-only reader's.

With ``AFConfig.blind_threshold`` set, every iteration scores the questions that have options with
the linear blind reader (:func:`lib.items.blind.blind_reader`: cross-fitted k-fold, folds grouped
by image) and a question judged this iteration whose probability of the right answer without the
image (``p_blind``) exceeds the threshold is treated as one the discriminators answered
(``blind_action: resample``: not accepted, new distractors next iteration) or dropped (``drop``).
After the last iteration the kept questions are scored again, and those still above the threshold
are dropped, until none is: what the stage keeps, the reader never answers above the threshold.

Not every question can be scored: the linear reader reads single-answer questions only, and needs
at least two images to hold one out. Those go unscored, never dropped, and are counted with the
reader's reason. Status of a dropped question: ``blind_dropped`` (left out of the output).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict

import numpy as np

from lib.af.configuration import AFConfig
from lib.af.questions import QState, as_item, plus_variant
from lib.items.blind import FOLDS, blind_reader

DROPPED = "blind_dropped"
KEPT = ("accepted", "never_fooled")
FIXED_OPTIONS = ("cond_sent_id",)  # their options never change: new distractors cannot help


def p_blind(qs: list[QState], seed: int, twins: bool = False) -> tuple[dict[str, float], Counter]:
    """``p_blind`` of each question that has options and is not dropped (NaN where unscored), and
    the unscored ones counted by the reader's reason. ``twins``: of their None+ twins instead
    (:func:`lib.af.questions.plus_variant`, as the stage writes them)."""
    shown = [q for q in qs if q.options and q.status != DROPPED]
    if not shown:
        return {}, Counter()
    items = [as_item(q) for q in shown]
    if twins:
        items = [plus_variant(it, seed) for it in items]
    scored = blind_reader(items, folds=FOLDS, seed=seed)
    reasons = Counter(r for r in scored["reason"] if r)
    return dict(zip(scored["item_id"], scored["p_blind"])), reasons


def gate(qs: dict[str, QState], ready: list[QState], cfg: AFConfig) -> dict:
    """Apply the blind verdict to the questions judged this iteration (``ready``), in place; returns
    the iteration's counts: scored, above the threshold, sent back (accepted by the discriminators,
    overruled), dropped, unscored."""
    p, reasons = p_blind(list(qs.values()), cfg.seed)
    judged = [p.get(q.skeleton["id"], np.nan) for q in ready]
    above = [q for q, v in zip(ready, judged) if v > cfg.blind_threshold]
    sent_back = dropped = 0
    for q in above:
        if cfg.blind_action == "drop":
            q.status, q.accepted_iteration = DROPPED, None
            dropped += 1
        elif q.status == "accepted":  # the discriminators were fooled, the text alone was not
            fixed = q.skeleton["type"] in FIXED_OPTIONS
            q.status, q.accepted_iteration = ("never_fooled" if fixed else "active"), None
            sent_back += 1
    return {
        "blind_scored": int(np.sum(~np.isnan(judged))) if judged else 0,
        "blind_above": len(above),
        "blind_sent_back": sent_back,
        "blind_dropped": dropped,
        "blind_unscored": sum(reasons.values()),
    }


def final_pass(state: dict, cfg: AFConfig) -> dict:
    """Drop the kept questions still above the threshold (status ``blind_dropped``), scoring the
    rest again until none is above it - in the None- form and, where the stage writes them, in the
    None+ twins (a question goes when either form is above); records and returns
    ``state["blind"]``. Run once: a rerun of a finished state keeps its record."""
    if "blind" in state:
        return state["blind"]
    qs = {k: QState(**v) for k, v in state["questions"].items()}
    twins = cfg.nota_position == "release" and cfg.none_of_the_above  # the stage's None+ form
    dropped, rounds, reasons = 0, 0, Counter()
    while True:
        kept = [q for q in qs.values() if q.options and q.status in KEPT]
        p, reasons = p_blind(kept, cfg.seed)
        plus = p_blind(kept, cfg.seed, twins=True)[0] if twins else {}
        above = [
            q
            for q in kept
            if p.get(q.skeleton["id"], np.nan) > cfg.blind_threshold
            or plus.get(q.skeleton["id"], np.nan) > cfg.blind_threshold
        ]
        rounds += 1
        for q in above:
            q.status, q.accepted_iteration = DROPPED, None
        dropped += len(above)
        if not above:
            break
    rows = state["iterations"]
    scored = [v for v in p.values() if not np.isnan(v)]
    scored_plus = [v for v in plus.values() if not np.isnan(v)]
    state["questions"] = {k: asdict(qs[k]) for k in state["questions"]}
    state["blind"] = {
        "threshold": cfg.blind_threshold,
        "action": cfg.blind_action,
        "sent_back": sum(r.get("blind_sent_back", 0) for r in rows),
        "dropped_in_loop": sum(r.get("blind_dropped", 0) for r in rows),
        "dropped_at_end": dropped,
        "rounds_at_end": rounds,
        "kept_scored": len(scored),
        "kept_max_p_blind": max(scored) if scored else None,
        "kept_max_p_blind_none_plus": max(scored_plus) if scored_plus else None,
        "kept_unscored": dict(reasons),
    }
    return state["blind"]


def sentence(blind: dict) -> str:
    """The gate's record in one sentence, for the stage's summary."""
    unscored = sum(blind["kept_unscored"].values())
    why = "; ".join(f"{n}: {r}" for r, n in blind["kept_unscored"].items())
    return (
        f"Blind gate (p_blind > {blind['threshold']}, {blind['action']}): the text-only reader "
        f"sent back {blind['sent_back']} accepted question(s) for new distractors, dropped "
        f"{blind['dropped_in_loop']} in the loop and {blind['dropped_at_end']} after it; "
        f"{blind['kept_scored']} kept question(s) scored, none above the threshold"
        + (f"; {unscored} not scored ({why})" if unscored else "")
        + "."
    )
