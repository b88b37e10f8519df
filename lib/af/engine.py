"""The adversarial-filtering loop (MemeQA, after Zellers et al.'s SWAG).

Each iteration: the generator writes distractors for every question still *active*; the
discriminator(s) answer the assembled multiple-choice question; a question answered wrongly is
*accepted* and frozen, one answered correctly stays active and gets new distractors next time, with
all of its earlier distractors named as forbidden in the prompt. Only active questions are sent to
the discriminator. The loop stops after ``max_iterations``, or earlier when the discriminator's
accuracy on the whole set has *stabilised*: it changed by less than ``stable_tol`` for ``patience``
consecutive iterations (``patience=0`` disables the rule; the seed ran 20 fixed iterations).
Questions never fooled are kept with their last options and ``meta.fooled = false`` (the seed's
``success + failed``).

The generation of distractors is :mod:`lib.af.generation`, a question's options and state
:mod:`lib.af.questions`, the stage's settings :mod:`lib.af.configuration`.

State (``state.json``) is written after every iteration; a killed run resumes from the last
finished iteration, and the call cache spares repeated calls inside the interrupted one.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from tqdm.auto import tqdm

from lib.af import blind_gate, rules
from lib.af.configuration import AFConfig
from lib.af.generation import generate_distractors
from lib.af.guards import GUARDS
from lib.af.questions import QState, as_item, assemble
from lib.af.skeletons import LLM_TYPES, Skeleton
from lib.core.schema import Item
from lib.io import write_json
from lib.models import generate
from lib.tasks import wants_question_first
from lib.tasks.registry import task_of


def discriminate(
    discriminators: list,
    items: list[Item],
    store,
    stats: dict,
    max_new_tokens: int,
    blind: bool = False,
) -> list[list]:
    """Each discriminator's parsed answer per item (a letter or a frozenset of indices; None = invalid),
    in at most ``max_new_tokens`` (``AFConfig.discriminator_max_new_tokens``)."""
    answers = []
    for model in discriminators:
        qf = wants_question_first(model.spec)
        reqs = [
            task_of(it).request(
                it, "/", question_first=qf, max_new_tokens=max_new_tokens, with_images=not blind
            )
            for it in items
        ]
        responses = generate(model, reqs, store=store, progress=False)
        stats["discriminator_calls"] += len(reqs)
        row = []
        for it, resp in zip(items, responses):
            value, _, valid = task_of(it).read_response(it, resp)
            if not valid:
                stats["invalid_discriminations"] += 1
            row.append(value)
        answers.append(row)
    return answers


def is_right(item: Item, answer) -> bool:
    """Is a read answer the gold one? (The discriminator's test.)"""
    return answer is not None and answer == task_of(item).reader.target(item)


# --- the loop -------------------------------------------------------------------------------------


def load_state(path: Path, skeletons: list[Skeleton], cfg: AFConfig) -> dict:
    """The loop's state: the one saved at ``path`` (it must have the same loop settings), or a fresh
    one with every skeleton an active question without options."""
    if path.exists():
        state = json.loads(path.read_text())
        if state["config"] != cfg.loop_settings():
            raise ValueError(
                f"{path} was made with a different AFConfig; delete it or use another output folder"
            )
        return state
    return {
        "config": cfg.loop_settings(),
        "iteration": 0,
        "done": False,
        "iterations": [],
        "questions": {s.id: asdict(QState(skeleton=s.to_dict())) for s in skeletons},
    }


def iteration_stats() -> dict:
    """An iteration's counters: model calls, invalid replies, rejected distractors (per guard) and
    the rule-type questions whose candidates ran out."""
    return {
        "generator_calls": 0,
        "discriminator_calls": 0,
        "invalid_generations": 0,
        "invalid_discriminations": 0,
        "rejected": 0,
        "exhausted": [],
        "rejected_by": dict.fromkeys(GUARDS + ("length_tell",), 0),
    }


def refresh_options(
    generator,
    active: list[QState],
    cfg: AFConfig,
    iteration: int,
    store,
    pool: rules.Pool,
    stats: dict,
) -> list[QState]:
    """New distractors for the active questions, assembled into new options; returns the questions
    that got a full set (the others sit this iteration out and stay active)."""
    new = generate_distractors(generator, active, cfg, iteration, store, pool, stats)
    ready = [q for q in active if q.skeleton["id"] in new and new[q.skeleton["id"]]]
    for q in ready:
        origin = "rule" if q.skeleton["type"] not in LLM_TYPES else f"generator:{generator.name}"
        q.history.append(new[q.skeleton["id"]])
        assemble(q, new[q.skeleton["id"]], cfg, iteration, origin)
    return ready


def judge(
    ready: list[QState],
    items: list[Item],
    answers: list[list],
    discriminators: list,
    cfg: AFConfig,
    iteration: int,
) -> tuple[int, int]:
    """Accept (freeze) each question the discriminators were fooled by, as ``cfg.combine`` counts
    them; returns how many were fooled and how many got an unreadable answer."""
    fooled = unreadable = 0
    for j, (q, item) in enumerate(zip(ready, items)):
        # an unreadable answer is no evidence the discriminator was fooled: it counts as not fooled
        # (the question stays active and is asked again), never as a wrong answer
        rights = [a[j] is None or is_right(item, a[j]) for a in answers]
        unreadable += any(a[j] is None for a in answers)
        q.last_answers = {
            m.name: (sorted(a[j]) if isinstance(a[j], frozenset) else a[j])
            for m, a in zip(discriminators, answers)
        }
        not_fooled = (sum(rights) * 2 > len(rights)) if cfg.combine == "vote" else any(rights)
        if not not_fooled:
            q.status, q.accepted_iteration = "accepted", iteration
            fooled += 1
        elif q.skeleton["type"] == "cond_sent_id":
            q.status = (
                "never_fooled"  # its three options are fixed: new iterations cannot change them
            )
    return fooled, unreadable


def iteration_row(
    iteration: int,
    qs: dict[str, QState],
    active: list[QState],
    ready: list[QState],
    fooled: int,
    unreadable: int,
    stats: dict,
    start: float,
) -> dict:
    """An iteration's row of the log: questions asked, waiting and fooled, the discriminator's
    accuracy over every question that has options, rejections and calls, seconds since ``start``."""
    # accuracy over every question that has options (and was not dropped by the blind gate)
    asked = [q for q in qs.values() if q.options and q.status != blind_gate.DROPPED]
    still_right = sum(q.status != "accepted" for q in asked)
    # active = the questions sent to the discriminator; waiting = active ones without new valid
    # distractors this iteration (they sit it out and stay active, unless a rule ran out of candidates)
    return {
        "iteration": iteration,
        "active": len(ready),
        "waiting": len(active) - len(ready),
        "fooled": fooled,
        "unreadable_answers": unreadable,
        "discriminator_accuracy": still_right / len(asked) if asked else float("nan"),
        "invalid_generations": stats["invalid_generations"],
        "invalid_discriminations": stats["invalid_discriminations"],
        "rejected_distractors": stats["rejected"],
        **{f"rejected_{k}": v for k, v in stats["rejected_by"].items()},
        "generator_calls": stats["generator_calls"],
        "discriminator_calls": stats["discriminator_calls"],
        "calls": stats["generator_calls"] + stats["discriminator_calls"],
        "seconds": round(time.perf_counter() - start, 3),
    }


def is_finished(state: dict, cfg: AFConfig, fooled: int) -> bool:
    """Does the loop stop after this iteration? The discriminator's accuracy stable for ``patience``
    iterations, an iteration after the first that fooled nothing (``stop_when_none_fooled``), or no
    active question left."""
    accs = [r["discriminator_accuracy"] for r in state["iterations"]]
    stable = (
        cfg.patience
        and len(accs) > cfg.patience
        and all(abs(accs[-k] - accs[-k - 1]) < cfg.stable_tol for k in range(1, cfg.patience + 1))
    )
    quiet = cfg.stop_when_none_fooled and state["iteration"] > 1 and fooled == 0
    return bool(
        stable or quiet or not any(q["status"] == "active" for q in state["questions"].values())
    )


def filter_iteration(
    state: dict, generator, discriminators: list, cfg: AFConfig, pool: rules.Pool, store=None
) -> dict:
    """One iteration on ``state`` (updated in place): new distractors for the active questions, the
    discriminators' answers, the fooled ones accepted; returns the iteration's row."""
    it = state["iteration"] + 1
    start = time.perf_counter()
    qs = {k: QState(**v) for k, v in state["questions"].items()}
    active = [q for q in qs.values() if q.status == "active"]
    stats = iteration_stats()
    ready = refresh_options(generator, active, cfg, it, store, pool, stats)
    items = [as_item(q) for q in ready]
    answers = (
        discriminate(discriminators, items, store, stats, cfg.discriminator_max_new_tokens)
        if items
        else []
    )
    for qid in stats[
        "exhausted"
    ]:  # a rule-type question whose candidates ran out: it cannot get harder
        if qs[qid].status == "active":
            qs[qid].status = "never_fooled"
    fooled, unreadable = judge(ready, items, answers, discriminators, cfg, it)
    row = iteration_row(it, qs, active, ready, fooled, unreadable, stats, start)
    if cfg.blind_threshold:  # beside the discriminators' verdict, the text-only reader's
        row.update(blind_gate.gate(qs, ready, cfg))
    state["iterations"].append(row)
    state["questions"] = {k: asdict(v) for k, v in qs.items()}
    state["iteration"] = it
    if is_finished(state, cfg, fooled):
        state["done"] = True
    return state["iterations"][-1]


def close_loop(state: dict) -> dict:
    """The final state: done, and the questions still active kept as never fooled (the seed's ``failed``)."""
    state["done"] = True
    for q in state["questions"].values():
        if q["status"] == "active":
            q["status"] = "never_fooled"
    return state


def filter_questions(
    skeletons: list[Skeleton],
    generator,
    discriminators: list,
    cfg: AFConfig,
    out: str | Path,
    store=None,
    progress: bool = True,
) -> dict:
    """Run (or resume) adversarial filtering; writes ``state.json`` after every iteration. Returns the
    final state: ``{"config", "iteration", "questions": {id: QState dict}, "iterations": [rows]}``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "state.json"
    state = load_state(path, skeletons, cfg)
    pool = rules.Pool.from_skeletons(
        [Skeleton(**q["skeleton"]) for q in state["questions"].values()]
    )
    bar = tqdm(
        total=cfg.max_iterations,
        initial=state["iteration"],
        desc="adversarial filtering",
        unit="iter",
        disable=not progress,
    )
    while not state["done"] and state["iteration"] < cfg.max_iterations:
        filter_iteration(state, generator, discriminators, cfg, pool, store)
        write_json(path, state)
        bar.update(1)
    bar.close()
    close_loop(state)
    if cfg.blind_threshold:
        blind_gate.final_pass(state, cfg)
    write_json(path, state)
    return state


def final_items(state: dict) -> list[Item]:
    """Accepted and never-fooled questions as mcq Items (options with their origins, the iteration a
    question was accepted in, its distractor history) in the form they were filtered in (their None+
    twins: :func:`plus_variant`). Questions that never got options, or that the blind gate dropped,
    are left out."""
    items = []
    for q in state["questions"].values():
        qs = QState(**q)
        if not qs.options or qs.status == blind_gate.DROPPED:
            continue
        item = as_item(qs)
        item.meta.update(
            fooled=qs.status == "accepted",
            accepted_iteration=qs.accepted_iteration,
            origins=qs.origins,
            history=qs.history,
            discriminator_answers=qs.last_answers,
            source=qs.skeleton["meta"].get("source"),
        )
        if state["config"].get("nota_position") == "release" or not state["config"].get(
            "none_of_the_above"
        ):
            item.meta["variant"] = "none-minus"
        items.append(item)
    return items


def blind_check(model, items: list[Item], max_new_tokens: int, store=None) -> list[bool]:
    """Text-only pass (no image): True where ``model`` answers correctly without seeing the image
    (a discriminator's answer: ``AFConfig.discriminator_max_new_tokens``)."""
    stats = {"discriminator_calls": 0, "invalid_discriminations": 0}
    answers = discriminate([model], items, store, stats, max_new_tokens, blind=True)[0]
    return [is_right(it, a) for it, a in zip(items, answers)]
