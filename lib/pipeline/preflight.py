"""Preflight: before stage 00 computes anything, check that every model, server and key a profile
needs is there, and say in one line per problem which model, which params file, and the fix.

    python -m lib.pipeline --profile real --preflight      # only this check
    make run PROFILE=real                                  # runs it first, stops on a problem

What is checked, per model spec the profile's stages use (each checked once), is what its backend
says it needs (:meth:`~lib.models.backend.Model.preflight`, the backend found by name as a model is
loaded), so a new backend needs no edit here. The ``hf`` backend checks its weights (in the local
hub cache, or online reachable with the caller's ``$HF_TOKEN``; a folder; an earlier run's output:
:func:`lib.models.probe.hub_problem`), the ``openai`` backend its key variable and every server of
its ``base_url`` (:func:`lib.models.probe.server_problem`); the embedded and baseline backends have
nothing to reach.

Hub ids in plain string fields (``clip_model``; a task option such as ``bertscore_model``): the
configs' :meth:`~lib.config.StageConfig.hub_ids`, checked as the ``hf`` backend checks its weights
(:func:`lib.models.probe.hub_problem`).

A stage run on its own checks the outputs of runs it reads where it uses them, before it starts
(:func:`lib.io.artifacts.missing_models`: stage 06's models named ``stage:`` or ``run:``).
"""

from __future__ import annotations

import json

from lib.config import ParamsError
from lib.models import check_spec
from lib.models.probe import hub_problem


def problem(spec: dict, offline: bool) -> str | None:
    """Why the model of ``spec`` cannot be used here, as its backend checks it, or None."""
    try:
        cls = check_spec(spec, "spec")
    except ParamsError as e:
        return str(e)
    return cls.preflight(spec, offline)


def _specs(value):
    if isinstance(value, dict) and "backend" in value:
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _specs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _specs(v)


def uses(steps) -> list[tuple[str, dict | str, str]]:
    """(what, spec or hub id, params file) for every model the resolved stages use, each once: the
    profile's models they name first (their file is the profile's), then specs written in a stage file."""
    seen, out = set(), []
    for step in steps:
        prof = step.resolved.profile
        for name in sorted(step.resolved.refs):
            spec = prof.models[name]
            key = json.dumps(spec, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                out.append(
                    (
                        f"model {name!r} ({spec.get('name', spec.get('backend'))})",
                        spec,
                        f"{prof.source.name} models.{name}",
                    )
                )
    for step in steps:
        cfg, origins = step.resolved.cfg, step.resolved.origins
        for field in type(cfg).MODEL_ROLES:
            for spec in _specs(getattr(cfg, field)):
                key = json.dumps(spec, sort_keys=True, default=str)
                if key not in seen:
                    seen.add(key)
                    out.append(
                        (
                            f"{step.stage} {field} {spec.get('name', spec.get('backend'))!r}",
                            spec,
                            origins.get(field, "the class default"),
                        )
                    )
        for field, name in cfg.hub_ids().items():
            if name not in seen:
                seen.add(name)
                out.append(
                    (
                        f"{step.stage} {field} {name!r}",
                        name,
                        origins.get(field.split(".")[0], "the class default"),
                    )
                )
    return out


def check(steps, offline: bool) -> list[str]:
    """One line per problem: the model, the params file that names it, the fix."""
    lines = []
    for what, spec, source in uses(steps):
        why = hub_problem(spec, offline) if isinstance(spec, str) else problem(spec, offline)
        if why:
            lines.append(f"{what} ({source}): {why}")
    return lines
