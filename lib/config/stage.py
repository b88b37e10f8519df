"""What every stage config is: a dataclass mixing in :class:`StageConfig` (built from params and
checked where it is made), model names bound to a profile's specs, and the run a stage's ``run()``
goes through (:func:`stage_run`) and ends with (:func:`finish`)."""

from __future__ import annotations

import json
import re
import typing
from contextlib import nullcontext
from contextvars import ContextVar
from dataclasses import MISSING, asdict, fields, replace
from functools import wraps
from pathlib import Path

from lib.config.checks import check_fields
from lib.config.errors import ParamsError, did_you_mean
from lib.core.paths import RunLock
from lib.core.ranks import ranks
from lib.io import write_json
from lib.io.folders import claimed, mark_stage
from lib.io.provenance import write_provenance

_SOURCE: ContextVar[str | None] = ContextVar(
    "params_source", default=None
)  # what from_params is reading


class StageConfig:
    """Mixin of the stage config dataclasses: building from params, checking, defaults.

    ``MODEL_ROLES`` maps each field that holds model specs to the profile model it takes when the
    profile leaves it unset (``None``: no role - the field keeps its default, e.g. "no judge").
    ``STAGE`` names the stage. :func:`lib.config.resolve` sets ``origin`` on the instance (profile,
    run, the file each field came from) for provenance; :func:`replaced` carries it over."""

    MODEL_ROLES: typing.ClassVar[dict[str, str | None]] = {}

    def __post_init__(self):
        """Every config is checked where it is made, so a notebook's or a script's
        ``EvalConfig(...)`` refuses what the command line and the params files refuse: each field
        against its annotation, then :meth:`check`. Errors name the params file being read
        (:meth:`from_params`) or, made in Python, the class."""
        check_values(self, _SOURCE.get() or type(self).__name__)

    @classmethod
    def from_params(
        cls, params: dict, source: str = "params", models: dict[str, dict] | None = None
    ):
        """The config from ``params`` (unknown keys and wrong types raise, naming ``source``);
        model fields may name models of ``models`` (a profile's registry) instead of holding specs."""
        values = dict(params)
        for k in cls.MODEL_ROLES.keys() & values.keys():
            values[k] = bind_models(values[k], models or {}, f"{source}: {k}")
        check_fields(cls, values, source, params=True)
        token = _SOURCE.set(source)
        try:
            return cls(**values)  # checked again by __post_init__, with check() naming source
        finally:
            _SOURCE.reset(token)

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

    def hub_ids(self) -> dict[str, str]:
        """Hub ids the run needs beside its models (field -> id; the preflight checks them): the
        ``HUB_FIELDS`` that are set; a subclass adds nested ones."""
        return {
            f: getattr(self, f) for f in getattr(type(self), "HUB_FIELDS", ()) if getattr(self, f)
        }

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self), default=str))


def check_values(cfg, source: str) -> None:
    """Every field of a stage config against its annotation, then its :meth:`StageConfig.check`."""
    values = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    check_fields(type(cfg), values, source, params=True)
    cfg.check(source)


def stage_run(run):
    """A stage's ``run(cfg, out, ...)`` as every caller gets it: the config checked again where it is
    used (a notebook cell may have edited it since it was made: ``cfg.sets = ...``), and the run
    folder (``out``'s parent) locked while it writes, whoever calls it (the command line, a notebook,
    a script); the lock this process or the pipeline above it holds is joined (:class:`lib.core.paths.RunLock`),
    and ``out`` claimed as the stage's (:func:`lib.io.folders.claimed`), by a job's main rank."""

    @wraps(run)
    def checked(cfg, out, *args, **kwargs):
        check_values(cfg, f"{type(cfg).__name__} (as run() got it)")
        # only the main rank locks, claims and marks: the other ranks write under it, meanwhile
        with (
            RunLock(Path(out).parent, join=True) if ranks().main else nullcontext() as lock,
            claimed(out, cfg.STAGE) if lock else nullcontext(),
        ):
            return run(cfg, out, *args, **kwargs)

    return checked


def is_model_name(value) -> bool:
    """A model reference: the name of a profile model (a plain word), not a spec or a path."""
    return isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", value) is not None


def model_names(value) -> list[str]:
    """The model names in a model field's raw value (a name, a list of them, label -> name)."""
    if isinstance(value, list):
        return [v for v in value if is_model_name(v)]
    if isinstance(value, dict) and "backend" not in value:
        return [v for v in value.values() if is_model_name(v)]
    return [value] if is_model_name(value) else []


def bind_models(value, models: dict[str, dict], where: str):
    """Replace model names in a model field's value by the profile's specs (names in a list, or the
    values of a label -> spec mapping, are replaced too); an unknown name raises with a suggestion."""

    def one(v, at):
        if not is_model_name(v):
            return v
        if v not in models:
            declared = ", ".join(sorted(models)) or "none"
            raise ParamsError(
                f"{at} names model {v!r}, which the profile does not declare{did_you_mean(v, models)} "
                f"(models: {declared}); declare it under models: in params/common.<profile>.yaml"
            )
        return dict(models[v])

    if isinstance(value, list):
        return [one(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and "backend" not in value:  # label -> spec (or name)
        return {k: one(v, f"{where}.{k}") for k, v in value.items()}
    return one(value, where)


def replaced(cfg, **changes):
    """``dataclasses.replace`` that keeps where the values came from (``origin``, for provenance)."""
    new = replace(cfg, **changes)
    new.origin = getattr(cfg, "origin", None)
    return new


def finish(out: Path, stage: str, cfg, summary: dict) -> dict:
    """Every stage's last step: ``summary.json``, ``provenance.json`` (the resolved config), and
    the folder marked as the stage's (:func:`lib.io.folders.mark_stage`: a notebook's run too)."""
    write_json(out / "summary.json", summary)
    mark_stage(out, stage)
    write_provenance(
        out, stage, cfg.to_dict(), getattr(cfg, "seed", None), origin=getattr(cfg, "origin", None)
    )
    return summary
