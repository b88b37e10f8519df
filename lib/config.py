"""Stage configs: one dataclass per stage is the single source of its defaults.

nanoGPT's configurator, for a pipeline: the dataclass holds the defaults (each knob with a *why*
comment), then params files override it (``params/common.<profile>.yaml``, then the stage's own),
then the notebook's papermill parameters or the command line. Every value is checked against the
field's annotation - nested ones too (``list[str]``, ``dict[str, dict]``, model specs) - and an
error names the file and the key at fault. The resolved config goes into ``provenance.json``.

Every stage module exposes the same contract::

    cfg = StageConfig.from_params({...}, source="params/NN_stage.demo.yaml")
    summary = run(cfg, out)                           # writes what the notebook writes
    python -m lib.<stage> --params FILE [--params FILE ...] --out DIR
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import types
import typing
from dataclasses import MISSING, asdict, fields
from pathlib import Path

import yaml

from lib.io import write_json
from lib.provenance import write_provenance

# Keys a params file may hold for the pipeline's sake that no stage config has: where the run goes.
PIPELINE_KEYS = ("run",)
MODEL_BACKENDS = ("hf", "openai", "tiny", "constant", "random")


class ParamsError(ValueError):
    """A params file names an unknown parameter or gives a value of the wrong type."""


def _type_name(tp) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def check_type(value, tp, where: str) -> None:
    """Raise :class:`ParamsError` unless ``value`` fits the annotation ``tp`` (``where`` names it)."""
    origin = typing.get_origin(tp)
    if tp is typing.Any or tp is object:
        return
    if origin in (typing.Union, types.UnionType):
        errors = []
        for arg in typing.get_args(tp):
            try:
                return check_type(value, arg, where)
            except ParamsError as e:
                errors.append(e)
        raise ParamsError(f"{where} must be {_type_name(tp)}, got {type(value).__name__} {value!r}")
    if tp is type(None):
        if value is not None:
            raise ParamsError(f"{where} must be None, got {value!r}")
        return
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ParamsError(f"{where} must be a list, got {type(value).__name__} {value!r}")
        args = typing.get_args(tp)
        if args and args[-1] is not Ellipsis:
            for i, v in enumerate(value):
                check_type(v, args[0], f"{where}[{i}]")
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise ParamsError(f"{where} must be a mapping, got {type(value).__name__} {value!r}")
        args = typing.get_args(tp)
        if args:
            for k, v in value.items():
                check_type(k, args[0], f"{where} key {k!r}")
                check_type(v, args[1], f"{where}.{k}")
        return
    base = origin or tp
    if base is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif base is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, base)
    if not ok:
        raise ParamsError(f"{where} must be {_type_name(tp)}, got {type(value).__name__} {value!r}")


def check_model_spec(spec, where: str, allow_empty: bool = False) -> None:
    """A model spec is a mapping with a known ``backend`` and, for hf / openai, a ``name``."""
    if allow_empty and spec in ({}, None):
        return
    if not isinstance(spec, dict):
        raise ParamsError(f"{where} must be a model spec (a mapping with 'backend'), got {spec!r}")
    if spec.get("backend") not in MODEL_BACKENDS:
        raise ParamsError(f"{where}.backend must be one of {MODEL_BACKENDS}, got {spec.get('backend')!r}")
    if spec["backend"] in ("hf", "openai") and not isinstance(spec.get("name"), str):
        raise ParamsError(f"{where}.name must name the model (hub id, folder or served name), got {spec.get('name')!r}")
    if spec["backend"] == "constant" and not isinstance(spec.get("answer"), str):
        raise ParamsError(f"{where}.answer must be the text the constant baseline always gives, got {spec.get('answer')!r}")
    if spec["backend"] == "random" and not isinstance(spec.get("seed", 0), int):
        raise ParamsError(f"{where}.seed must be an integer, got {spec.get('seed')!r}")
    if "api_key" in spec:
        raise ParamsError(f"{where}: put the *name* of an environment variable in 'api_key_env', never a key")
    env = spec.get("api_key_env")
    if env is not None and not (isinstance(env, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", env)):
        raise ParamsError(f"{where}.api_key_env must name an environment variable (letters, digits, _), not hold a "
                          f"key; the value given is not shown")


class StageConfig:
    """Mixin of the stage config dataclasses: building from params, checking, defaults."""

    @classmethod
    def from_params(cls, params: dict, source: str = "params"):
        """The config from ``params`` (unknown keys and wrong types raise, naming ``source``)."""
        hints = typing.get_type_hints(cls)
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - names - set(PIPELINE_KEYS))
        if unknown:
            raise ParamsError(f"{source}: unknown parameter(s) {unknown} for {cls.__name__} "
                              f"(known: {', '.join(sorted(names))})")
        values = {k: v for k, v in params.items() if k in names}
        for k, v in values.items():
            check_type(v, hints[k], f"{source}: parameter {k!r}")
        cfg = cls(**values)
        cfg.check(source)
        return cfg

    @classmethod
    def defaults(cls) -> dict:
        """Field name -> default value (fields without one are left out)."""
        out = {}
        for f in fields(cls):
            if f.default is not MISSING:
                out[f.name] = f.default
            elif f.default_factory is not MISSING:
                out[f.name] = f.default_factory()
        return out

    def check(self, source: str) -> None:
        """Nested checks beyond the annotations (model specs...); subclasses extend it."""

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self), default=str))


def notebook_params(cls, namespace: dict) -> dict:
    """The config fields a notebook defines (its parameters cell), for ``cls.from_params``."""
    return {f.name: namespace[f.name] for f in fields(cls) if f.name in namespace}


def load_params(paths: list[str | Path]) -> tuple[dict, str]:
    """Merge flat YAML params files (later wins); returns the values and a name for errors."""
    merged: dict = {}
    for path in paths:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except yaml.YAMLError as e:
            raise ParamsError(f"{path}: not valid YAML ({e})") from None
        if not isinstance(data, dict):
            raise ParamsError(f"{path}: a params file is a flat mapping of parameter names to values")
        merged.update(data)
    return merged, " + ".join(str(p) for p in paths) or "defaults"


def finish(out: Path, stage: str, cfg, summary: dict) -> dict:
    """Every stage's last step: ``summary.json`` and ``provenance.json`` (the resolved config)."""
    write_json(out / "summary.json", summary)
    write_provenance(out, stage, cfg.to_dict(), getattr(cfg, "seed", None))
    return summary


def main(prog: str, cls, run, argv: list[str] | None = None, description: str = "") -> int:
    """The command line every stage shares: ``--params FILE`` (repeatable) ``--out DIR``."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--params", action="append", default=[], help="flat YAML of config fields (repeatable; later wins)")
    ap.add_argument("--out", required=True, help="the stage folder to write (outputs/<run>/<stage>/ in a pipeline)")
    args = ap.parse_args(argv)
    try:
        params, source = load_params(args.params)
        cfg = cls.from_params(params, source=source)
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = run(cfg, Path(args.out))
    print(json.dumps(summary, indent=1, default=str))
    return 0
