"""What a model is sent in stage 06, built in one place: an item's zero-shot request (its task's
:meth:`~lib.tasks.Task.request` with the run's constraint, token limit and seed, in the model's
question order) and a style's requests on top of it (:meth:`lib.tasks.styles.Style.final`).
Evaluation (:func:`lib.eval.ask.predict`) sends them; comparison
(:func:`lib.compare.explain.request_parts`) rebuilds the zero-shot one to name what differs between
two runs, so the two cannot disagree about what was asked."""

from __future__ import annotations

from pathlib import Path

from lib.core.schema import Item, Request
from lib.eval.settings import EvalConfig
from lib.tasks import STYLES, wants_question_first
from lib.tasks.registry import task_of


def zero_shot(cfg: EvalConfig, item: Item, root: str | Path, spec: dict) -> Request:
    """The zero-shot request ``item`` (of the dataset folder ``root``) is sent under ``cfg`` by a
    model of ``spec``: constrained to its task's choices when ``cfg.constrain``, its task's answer
    token limit, the run's seed. Every style starts from it."""
    return task_of(item).request(
        item,
        root,
        question_first=wants_question_first(spec),
        constrain=cfg.constrain,
        max_new_tokens=cfg.answer_tokens(item.task),
        seed=cfg.seed,
    )


def styled(
    cfg: EvalConfig,
    model,
    items: list[Item],
    root: str | Path,
    style: str,
    store=None,
    progress: bool = True,
    desc: str = "",
) -> tuple[list[Request], list]:
    """``(requests, reasoning)``: the requests whose replies are ``model``'s answers to ``items`` in
    ``style``, each built on its :func:`zero_shot` request, and the reasoning reply each follows
    (None for a style without one; a style that reasons asks ``model`` here, through ``store``,
    up to ``cfg.cot_max_new_tokens`` tokens). ``desc`` labels the reasoning's progress bar."""
    first = [zero_shot(cfg, it, root, model.spec) for it in items]
    return STYLES[style].final(
        model,
        first,
        lambda: [task_of(it).prompt(it, root) for it in items],
        wants_question_first(model.spec),
        cfg.cot_max_new_tokens,
        cfg.seed,
        store,
        progress,
        desc,
    )
