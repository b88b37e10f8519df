"""Stage configs and profiles: one dataclass per stage is the single source of its defaults.

nanoGPT's configurator, for a pipeline: the dataclass holds the defaults (each knob with a *why*
comment), then a *profile* overrides it - ``params/common.<profile>.yaml`` (the profile's stages, its
named models, offline or not, and fields every stage shares, such as ``seed``), then
``params/NN_stage.<profile>.yaml`` - then the overrides of a notebook or a command line. Every value
is checked against the field's annotation - nested ones too (``list[str]``, ``dict[str, dict]``,
model specs) - and an error names the file and the key at fault, with a "did you mean" for a
misspelt key. :func:`resolve` does this once, for the notebooks, the pipeline and the command line
alike; the resolved config and where each value came from go into ``provenance.json``.

Models are declared once per profile (``models:`` in the common file, name -> spec); a stage refers
to one by its name wherever a model spec goes (``generator: llm``, ``discriminators: [vlm]``). A
model field the profile leaves unset takes the profile's model of the field's role
(``MODEL_ROLES``: the VLM ``vlm``, the text LLM ``llm``), never the class's embedded tiny default.

Every stage module exposes the same contract::

    stage = resolve(AFConfig, profile="demo", overrides={...})
    summary = run(stage.cfg, stage.out)                    # what the notebook does
    python -m lib.stages.<name> --profile demo [--set key=value ...] [--out DIR]
    python -m lib.stages.<name> --params FILE [--params FILE ...] --out DIR

Every stage's ``run()`` goes through :func:`stage_run` (its config checked again, the run folder
locked); the command line itself (arguments, offline profiles) is :mod:`lib.config.cli`.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import types
import typing
from contextlib import nullcontext
from contextvars import ContextVar
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from functools import cache, wraps
from pathlib import Path

import yaml

from lib.core.paths import ROOT, RunLock, check_name, params_root, stage_dir
from lib.core.ranks import ranks
from lib.io import artifacts, write_json
from lib.io.folders import claimed, mark_stage
from lib.io.provenance import write_provenance

# Keys of params/common.<profile>.yaml that describe the profile rather than set a stage field.
PROFILE_KEYS = ("run", "stages", "models", "offline", "extends", "cluster")
# What an offline profile sets before anything loads a model: a stray hub call fails in milliseconds.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


class ParamsError(ValueError):
    """A params file names an unknown parameter or gives a value of the wrong type."""


def did_you_mean(word: str, known) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string."""
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def short(value, limit: int = 120) -> str:
    """``repr`` cut to ``limit`` characters: an error message never echoes a huge value."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


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
        raise ParamsError(
            f"{where} must be {_type_name(tp)}, got {type(value).__name__} {short(value)}"
        )
    if tp is type(None):
        if value is not None:
            raise ParamsError(f"{where} must be None, got {short(value)}")
        return
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ParamsError(f"{where} must be a list, got {type(value).__name__} {short(value)}")
        args = typing.get_args(tp)
        if args and args[-1] is not Ellipsis:
            for i, v in enumerate(value):
                check_type(v, args[0], f"{where}[{i}]")
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise ParamsError(
                f"{where} must be a mapping, got {type(value).__name__} {short(value)}"
            )
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
        raise ParamsError(
            f"{where} must be {_type_name(tp)}, got {type(value).__name__} {short(value)}"
        )


def dataclass_from(cls, values: dict, where: str):
    """``cls(**values)`` for a settings dataclass, with unknown keys (with a "did you mean") and
    wrong types raised as :class:`ParamsError` naming ``where`` and the key."""
    if not isinstance(values, dict):
        raise ParamsError(
            f"{where} must be a mapping of {cls.__name__} fields, got {short(values)}"
        )
    hints, names = _hints(cls), [f.name for f in fields(cls)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ParamsError(
            f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], names)} "
            f"(keys: {', '.join(names)})"
        )
    for k, v in values.items():
        check_type(v, hints[k], f"{where}.{k}")
    return cls(**values)


_SOURCE: ContextVar[str | None] = ContextVar(
    "params_source", default=None
)  # what from_params is reading


@cache
def _hints(cls) -> dict:
    """A settings class's field annotations, resolved once (every config made checks against them)."""
    return typing.get_type_hints(cls)


class StageConfig:
    """Mixin of the stage config dataclasses: building from params, checking, defaults.

    ``MODEL_ROLES`` maps each field that holds model specs to the profile model it takes when the
    profile leaves it unset (``None``: no role - the field keeps its default, e.g. "no judge").
    ``STAGE`` names the stage. :func:`resolve` sets ``origin`` on the instance (profile, run, the
    file each field came from) for provenance; :func:`replaced` carries it over."""

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
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - names)
        if unknown:
            raise ParamsError(
                f"{source}: unknown parameter(s) {unknown} for {cls.__name__}"
                f"{did_you_mean(unknown[0], names)} (known: {', '.join(sorted(names))})"
            )
        values = {k: v for k, v in params.items() if k in names}
        for k in cls.MODEL_ROLES.keys() & values.keys():
            values[k] = bind_models(values[k], models or {}, f"{source}: {k}")
        token = _SOURCE.set(source)
        try:
            return cls(**values)  # checked by __post_init__, naming source
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
    hints = _hints(type(cfg))
    for f in fields(cfg):
        check_type(getattr(cfg, f.name), hints[f.name], f"{source}: parameter {f.name!r}")
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
        with RunLock(Path(out).parent, join=True) if ranks().main else nullcontext() as lock:
            with claimed(out, cfg.STAGE) if lock else nullcontext():
                return run(cfg, out, *args, **kwargs)

    return checked


def _is_ref(value) -> bool:
    """A model reference: the name of a profile model (a plain word), not a spec or a path."""
    return isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", value) is not None


def bind_models(value, models: dict[str, dict], where: str):
    """Replace model names in a model field's value by the profile's specs (names in a list, or the
    values of a label -> spec mapping, are replaced too); an unknown name raises with a suggestion."""

    def one(v, at):
        if not _is_ref(v):
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


class _ParamsLoader(yaml.SafeLoader):
    """YAML for params: a repeated key is an error (YAML itself keeps the last silently), and
    anchors/aliases are refused (an alias bomb expands a few hundred bytes into gigabytes)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(
                f"line {event.start_mark.line + 1}: aliases (*{event.anchor}) are not allowed in "
                f"params files: write the value out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.YAMLError(
                    f"line {key_node.start_mark.line + 1}: key {key!r} appears twice"
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, where: str):
    """Parse params YAML (a value of ``--set`` or a file), errors naming ``where``."""
    try:
        return yaml.load(text, Loader=_ParamsLoader)
    except yaml.YAMLError as e:
        raise ParamsError(f"{where}: not valid params YAML ({short(str(e), 300)})") from None
    except RecursionError:
        raise ParamsError(f"{where}: nested too deeply to be params") from None


def load_layer(path: str | Path) -> dict:
    """One flat YAML params file (a missing file is an error naming it)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ParamsError(f"{path}: no such params file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ParamsError(f"{path}: cannot read it ({e})") from None
    data = parse_yaml(text, str(path)) or {}
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: a params file is a flat mapping of parameter names to values")
    return data


def profiles(params_dir: str | Path | None = None) -> list[str]:
    """The profiles shipped in ``params/``: one per ``common.<profile>.yaml``."""
    return sorted(
        p.name.split(".")[1] for p in Path(params_dir or params_root()).glob("common.*.yaml")
    )


@dataclass
class Profile:
    """``params/common.<name>.yaml``: the stages a profile runs, its models, offline or not, and the
    fields every stage of it shares (``shared``, e.g. ``seed``)."""

    name: str
    run: str
    stages: list[str]
    models: dict[str, dict]
    offline: bool
    shared: dict
    source: Path
    parent: Profile | None = None  # ``extends:``: the profile this one adds to
    cluster: dict | None = (
        None  # ``cluster:``, its stages as jobs (lib.pipeline.scheduler.cluster reads it)
    )

    def stage_file(self, stage: str) -> Path:
        return self.source.parent / f"{stage}.{self.name}.yaml"

    def stage_files(self, stage: str) -> list[Path]:
        """The stage's params files, the extended profile's first."""
        own = [self.stage_file(stage)] if self.stage_file(stage).exists() else []
        return (self.parent.stage_files(stage) if self.parent else []) + own


def load_profile(name: str, params_dir: str | Path | None = None) -> Profile:
    """Read and check ``params/common.<name>.yaml`` (unknown stages, bad model specs, stage files of
    stages the profile does not run: errors naming the file and what to do)."""
    folder = Path(params_dir or params_root())
    check_name(name, "profile name", ParamsError)
    path = folder / f"common.{name}.yaml"
    if not path.exists():
        known = profiles(folder)
        raise ParamsError(
            f"unknown profile {name!r}: no {path}{did_you_mean(name, known)} (profiles: {', '.join(known)})"
        )
    data = load_layer(path)
    parent = None
    if "extends" in data:
        check_type(data["extends"], str, f"{path}: extends")
        if data["extends"] == name:
            raise ParamsError(f"{path}: a profile cannot extend itself")
        parent = load_profile(data["extends"], folder)
        data = {
            "run": parent.run,
            "stages": parent.stages,
            "offline": parent.offline,
            **parent.shared,
            **data,
            "models": {**parent.models, **(data.get("models") or {})},
        }
    for key in ("run", "stages"):
        if key not in data:
            raise ParamsError(
                f"{path}: a profile must say its {key!r} (run: the outputs folder name; "
                f"stages: the stages it runs, from {', '.join(artifacts.STAGES)})"
            )
    run, stages, models = data["run"], data["stages"], data.get("models") or {}
    check_type(run, str, f"{path}: run")
    check_name(run, f"{path}: run name", ParamsError)
    check_type(stages, list[str], f"{path}: stages")
    for s in stages:
        if s not in artifacts.STAGES:
            raise ParamsError(
                f"{path}: unknown stage {s!r} in stages{did_you_mean(s, artifacts.STAGES)} (stages: {', '.join(artifacts.STAGES)})"
            )
    check_type(
        models, dict[str, dict], f"{path}: models"
    )  # each spec is its backend's to check (lib.models)
    offline = data.get("offline", False)
    check_type(offline, bool, f"{path}: offline")
    for other in sorted(folder.glob(f"*.{name}.yaml")):
        stage = other.name.split(".")[0]
        if other != path and stage not in stages:
            raise ParamsError(
                f"{other}: sets stage {stage} but {path} does not run it: add {stage} to its stages "
                f"or delete the file"
            )
    shared = {k: v for k, v in data.items() if k not in PROFILE_KEYS}
    cluster = data.get("cluster", parent and parent.cluster)  # extends: the parent's unless set
    stages = [s for s in artifacts.STAGES if s in stages]
    return Profile(name, run, stages, models, offline, shared, path, parent, cluster)


@dataclass
class Resolved:
    """A stage's config as a profile resolves it, where each value came from, and where it writes."""

    stage: str
    cfg: StageConfig
    profile: Profile | None
    run: str
    origins: dict[str, str] = field(
        default_factory=dict
    )  # field -> the file (or "default") that set it
    refs: set[str] = field(default_factory=set)  # the profile models it names
    files: list[str] = field(default_factory=list)  # the params layers read, in order

    @property
    def out(self) -> Path:
        return stage_dir(self.run, self.stage)

    def table(self):
        """The resolved config, one row per field: value and where it came from (for notebooks)."""
        import pandas as pd  # deferred: every stage's command line imports this module, few need pandas here

        values = self.cfg.to_dict()
        return pd.DataFrame(
            [
                {
                    "field": k,
                    "value": json.dumps(v, default=str),
                    "from": self.origins.get(k, "default"),
                }
                for k, v in values.items()
            ]
        ).set_index("field")

    def describe(self) -> str:
        where = f"profile {self.profile.name}" if self.profile else "no profile"
        return f"{self.stage} ({where}, run {self.run!r}): " + ", ".join(
            f"{k}={v!r}"
            for k, v in self.cfg.to_dict().items()
            if self.origins.get(k, "default") != "default"
        )


def resolve(
    cls,
    profile: str | Profile | None | bool = None,
    run: str | None = None,
    overrides: dict | None = None,
    params_dir: str | Path | None = None,
    extra: list[str | Path] = (),
) -> Resolved:
    """The one way a stage config is built: the class defaults, then the profile's common file and its
    stage file, then ``extra`` params files, then ``overrides``; model names bound to the profile's
    models; model fields the profile leaves unset bound to the model of their role. ``profile=None``
    (or "") uses ``$VQALAB_PROFILE``, else ``demo``; ``profile=False`` uses none."""
    stage = cls.STAGE
    if (
        isinstance(profile, Profile) or profile is False
    ):  # False: no profile (a command line's params files)
        prof = profile or None
    else:
        prof = load_profile(profile or os.environ.get("VQALAB_PROFILE") or "demo", params_dir)
    if prof is not None and stage not in prof.stages:
        raise ParamsError(
            f"profile {prof.name} does not run {stage} (stages in {prof.source}: "
            f"{', '.join(prof.stages)}); add it there to run it"
        )
    if run:
        check_name(run, "--run: run name", ParamsError)
    layers: list[tuple[str, dict]] = []
    if prof is not None:
        names = {f.name for f in fields(cls)}
        bad = [k for k in prof.shared if k not in names]
        if bad:
            raise ParamsError(
                f"{prof.source}: {bad[0]!r} is neither a profile key ({', '.join(PROFILE_KEYS)}) nor a "
                f"field of {cls.__name__} ({stage}){did_you_mean(bad[0], names | set(PROFILE_KEYS))}; "
                f"a stage's own fields go in {prof.stage_file(stage).name}"
            )
        layers.append((_shown(prof.source), prof.shared))
        layers += [(_shown(p), load_layer(p)) for p in prof.stage_files(stage)]
    layers += [(_shown(p), load_layer(p)) for p in extra]
    if overrides:
        layers.append(("overrides", dict(overrides)))
    values, origins = {}, {}
    hints, names = _hints(cls), {f.name for f in fields(cls)}
    for source, data in layers:
        for k, v in data.items():
            if k not in names:
                raise ParamsError(
                    f"{source}: unknown parameter(s) [{k!r}] for {cls.__name__}{did_you_mean(k, names)} "
                    f"(known: {', '.join(sorted(names))})"
                )
            if k not in cls.MODEL_ROLES:  # model fields may hold names: checked once bound
                check_type(v, hints[k], f"{source}: parameter {k!r}")
            values[k], origins[k] = v, source
    models = prof.models if prof is not None else {}
    if prof is not None:
        _bind_roles(cls, prof, values, origins)
    sources = " + ".join(dict.fromkeys(origins.values())) or "defaults"
    refs = {r for k in cls.MODEL_ROLES.keys() & values.keys() for r in _names(values[k])}
    cfg = cls.from_params(values, source=sources, models=models)
    name = run or (prof.run if prof is not None else None) or "default"
    cfg.origin = {"profile": prof.name if prof else None, "run": name, "fields": origins}
    return Resolved(stage, cfg, prof, name, origins, refs, [src for src, _ in layers])


def _bind_roles(cls, prof: Profile, values: dict, origins: dict) -> None:
    """Model fields ``values`` leaves unset take the profile's model of their role (``MODEL_ROLES``),
    recorded in ``origins``; a role the profile declares no model for is an error naming the file."""
    stage, models = cls.STAGE, prof.models
    for name, role in cls.MODEL_ROLES.items():
        if name in values or role is None:
            continue
        if role == "*":  # every model of the profile (stage 00 probes them)
            values[name], origins[name] = dict(models), f"{_shown(prof.source)} models"
        elif role in models:
            default = cls.defaults().get(name)
            is_map = isinstance(default, dict) and default and "backend" not in default
            values[name] = [role] if isinstance(default, list) else {role: role} if is_map else role
            origins[name] = f"{_shown(prof.source)} models.{role}"
        else:
            raise ParamsError(
                f"{stage}: {name} is not set and {prof.source} declares no model {role!r} "
                f"(models: {', '.join(models) or 'none'}); declare it under models: or set {name} "
                f"in {prof.stage_file(stage).name}"
            )


def _shown(path) -> str:
    """A params file as the plan and the errors show it: relative to the project when inside it."""
    return str(Path(path).relative_to(ROOT)) if Path(path).is_relative_to(ROOT) else str(path)


def _names(value) -> list[str]:
    """The model names in a model field's raw value (a name, a list of them, label -> name)."""
    if isinstance(value, list):
        return [v for v in value if _is_ref(v)]
    if isinstance(value, dict) and "backend" not in value:
        return [v for v in value.values() if _is_ref(v)]
    return [value] if _is_ref(value) else []


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
