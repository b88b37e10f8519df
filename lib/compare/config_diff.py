"""The config diff of two compared runs (:mod:`lib.compare.explain`): the resolved values that
differ, each with where it came from (a params file, the code, the default), and the two commits."""

from __future__ import annotations

from dataclasses import asdict

from lib.compare.evaluations import Run
from lib.eval.settings import EvalConfig


def flatten(value, prefix: str = "") -> dict:
    """Nested dicts as ``{"a.b": leaf}`` (lists and other values are leaves; an empty dict adds nothing)."""
    if not isinstance(value, dict):
        return {prefix: value} if prefix else {}
    out = {}
    for k, v in value.items():
        out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def resolved_values(cfg: EvalConfig) -> dict:
    """A config's resolved values, flat: its fields, every task's options over their defaults."""
    return flatten(
        {**cfg.to_dict(), "tasks": {name: asdict(opts) for name, opts in cfg.options.items()}}
    )


def _source(run: Run, key: str) -> str:
    """Where a resolved value came from: the params file provenance records for its field, the
    code that built the config (no file recorded), or the config class's default."""
    top = key.split(".")[0]
    if top in (run.provenance.get("params_from") or {}):
        return run.provenance["params_from"][top]
    given = flatten(run.cfg.to_dict())
    if top == "tasks":
        return "set, no params file recorded" if key in given else "default"
    defaults = flatten(type(run.cfg)().to_dict())
    return "set, no params file recorded" if given.get(key) != defaults.get(key) else "default"


def config_diff(run_a: Run, run_b: Run) -> list[dict]:
    """The resolved config values that differ, each with where it came from (:func:`_source`),
    and the two commits when they differ."""
    flat_a, flat_b = resolved_values(run_a.cfg), resolved_values(run_b.cfg)
    rows = [
        {
            "key": k,
            "A": flat_a.get(k),
            "B": flat_b.get(k),
            "A_from": _source(run_a, k),
            "B_from": _source(run_b, k),
        }
        for k in sorted(set(flat_a) | set(flat_b))
        if flat_a.get(k) != flat_b.get(k)
    ]
    if run_a.sha != run_b.sha:
        rows.append(
            {
                "key": "git commit",
                "A": run_a.sha,
                "B": run_b.sha,
                "A_from": "provenance",
                "B_from": "provenance",
            }
        )
    return rows
