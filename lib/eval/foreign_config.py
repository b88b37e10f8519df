"""The evaluation config of an lmms-eval import (:mod:`lib.eval.foreign`): the model lmms-eval ran
as an ``imported`` spec, its label, the exports' scoring and token limits as one
:class:`lib.eval.settings.EvalConfig`, and where each of its values came from."""

from __future__ import annotations

import json
import re
from pathlib import Path

from lib.eval.foreign_samples import STYLE
from lib.eval.foreign_schema import ForeignError, clean, printable
from lib.eval.settings import EvalConfig

HARNESS = "lmms-eval"


def model_path(results: dict) -> str | None:
    """``chat`` or ``simple``: the path lmms-eval's model took (its ``model_backend``), None unknown."""
    m = re.search(r"\((\w+)\)\s*$", str((results.get("config") or {}).get("model_backend") or ""))
    return m.group(1) if m else None


def generation_kwargs(results: dict, task: str) -> dict:
    return dict(((results.get("configs") or {}).get(task) or {}).get("generation_kwargs") or {})


def _one(values: dict, what: str):
    """The one value every export agrees on; several raise (import those lmms-eval tasks apart)."""
    distinct = {json.dumps(v, sort_keys=True): v for v in values.values()}
    if len(distinct) > 1:
        raise ForeignError(
            f"the exports differ in {what} ({', '.join(f'{k}: {v}' for k, v in values.items())}): "
            f"import their lmms-eval tasks one at a time (a samples file each)"
        )
    return next(iter(distinct.values()))


def model_spec(results: dict, exports: dict, tasks) -> dict:
    """The ``imported`` spec of the model lmms-eval ran (:mod:`lib.models.imported`), as it recorded it."""
    config = results.get("config") or {}
    generation = _one(
        {
            t: {k: v for k, v in generation_kwargs(results, t).items() if k != "max_new_tokens"}
            for t in tasks
        },
        "decoding settings",
    )
    spec = {
        "backend": "imported",
        "harness": HARNESS,
        "harness_version": results.get("lmms_eval_version"),
        "name": results.get("model_name") or config.get("model"),
        "model": results.get("model_source"),
        "model_args": config.get("model_args"),
        "path": model_path(results),
        "generation": generation or None,
        "question_first": _one(
            {name: info["question_first"] for name, (_, info) in exports.items()}, "question order"
        ),
    }
    return clean({k: v for k, v in spec.items() if v is not None})  # labels a comparison prints


def model_label(found: dict) -> str:
    """The imported model's label: the stage 06 model the exports took their settings from (so the
    comparison pairs it with that model's answers), else ``lmms-eval``."""
    labels = {(info.get("settings_from") or {}).get("model") for _, info in found.values()}
    return labels.pop() if len(labels) == 1 and None not in labels else HARNESS


def _task_options(exports: dict, limits: dict) -> tuple[dict, int]:
    """Every task's scoring options the exports agree on, and the token limit most tasks were asked
    with (the config's ``max_new_tokens``); a task asked with another limit gets its own."""
    tasks: dict = {}
    for name, (_, info) in exports.items():
        for task, options in (info["scoring"].get("tasks") or {}).items():
            if options is None:  # null: the task's defaults, as absent
                continue
            tasks[task] = _one(
                {"before": tasks.get(task, options), name: options}, f"task {task}'s options"
            )
    base = max(sorted(set(limits.values())), key=list(limits.values()).count)  # the commonest limit
    for task, limit in limits.items():
        if limit != base or "max_new_tokens" in tasks.get(task, {}):
            tasks[task] = {**tasks.get(task, {}), "max_new_tokens": limit}
    return tasks, base


def _sources(results_path: Path | None) -> dict:
    """Where each value of an imported config came from: the export, lmms-eval's results file, or
    nowhere (a field an import does not use)."""
    ran = (
        f"lmms-eval {printable(results_path.name)}"
        if results_path
        else "the export's vqalab.json (no lmms-eval results.json)"
    )
    sources = {
        "datasets": "the export's vqalab.json",
        "models": ran,
        "styles": "the export (zero-shot prompts)",
        "constrain": "lmms-eval generate_until (free generation)",
        "max_new_tokens": ran,
        "tasks": ran,
        "n_resamples": "the export's vqalab.json",
        "seed": "the export's vqalab.json",
    }
    for name in (
        "demo_data",
        "only_tasks",
        "cot_max_new_tokens",
        "judge",
        "judge_max_new_tokens",
        "max_items",
    ):
        sources[name] = "not used by an lmms-eval import"
    return sources


def imported_config(
    found: dict, results: dict, results_path: Path | None, label: str, limits: dict
) -> tuple:
    """The imported folder's :class:`EvalConfig` and where each of its values came from (recorded
    as provenance's ``params_from``, which the comparison's config diff shows)."""
    exports = {info["name"]: (folder, info) for folder, info in found.values()}
    scoring = _one(
        {
            name: {k: info["scoring"][k] for k in ("n_resamples", "seed")}
            for name, (_, info) in exports.items()
        },
        "scoring settings",
    )
    tasks, base = _task_options(exports, limits)
    try:
        cfg = EvalConfig(
            datasets={name: info["dataset"] for name, (_, info) in exports.items()},
            models={label: model_spec(results, exports, found)},
            styles=[STYLE],
            constrain=False,
            max_new_tokens=base,
            tasks=tasks,
            judge=None,
            **scoring,
        )
    except ValueError as e:  # ParamsError: a label or an export's setting this version refuses
        raise ForeignError(f"the imported config: {e}") from None
    return cfg, _sources(results_path)
