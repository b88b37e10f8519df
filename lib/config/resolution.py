"""Resolving a stage's config: the class defaults, then the profile's layers, then params files and
overrides, each value checked against the file that set it, and model names bound to the profile's
models (:func:`resolve`, the one way a stage config is built)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from lib.config.checks import check_fields, field_types
from lib.config.errors import ParamsError, did_you_mean
from lib.config.files import load_layer
from lib.config.profile import PROFILE_KEYS, Profile, load_profile
from lib.config.stage import StageConfig, model_names
from lib.core.paths import ROOT, check_name, stage_dir


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
    layers = _layers(cls, prof, extra, overrides)
    values, origins = {}, {}
    for source, data in layers:
        # each value against the file that set it; model fields may hold names: checked once bound
        checked = {k: v for k, v in data.items() if k not in cls.MODEL_ROLES}
        check_fields(cls, checked, source, params=True)
        values.update(data)
        origins.update(dict.fromkeys(data, source))
    if prof is not None:
        _bind_roles(cls, prof, values, origins)
    sources = " + ".join(dict.fromkeys(origins.values())) or "defaults"
    refs = {r for k in cls.MODEL_ROLES.keys() & values.keys() for r in model_names(values[k])}
    models = prof.models if prof is not None else {}
    cfg = cls.from_params(values, source=sources, models=models)
    name = run or (prof.run if prof is not None else None) or "default"
    cfg.origin = {"profile": prof.name if prof else None, "run": name, "fields": origins}
    return Resolved(stage, cfg, prof, name, origins, refs, [src for src, _ in layers])


def _layers(cls, prof: Profile | None, extra, overrides: dict | None) -> list[tuple[str, dict]]:
    """(source, values) of every params layer, in order: the profile's shared fields (each a field of
    ``cls``, or an error naming the file) and stage files, ``extra`` files, then ``overrides``."""
    layers: list[tuple[str, dict]] = []
    if prof is not None:
        names = set(field_types(cls))
        bad = [k for k in prof.shared if k not in names]
        if bad:
            raise ParamsError(
                f"{prof.source}: {bad[0]!r} is neither a profile key ({', '.join(PROFILE_KEYS)}) nor a "
                f"field of {cls.__name__} ({cls.STAGE}){did_you_mean(bad[0], names | set(PROFILE_KEYS))}; "
                f"a stage's own fields go in {prof.stage_file(cls.STAGE).name}"
            )
        layers.append((_shown(prof.source), prof.shared))
        layers += [(_shown(p), load_layer(p)) for p in prof.stage_files(cls.STAGE)]
    layers += [(_shown(p), load_layer(p)) for p in extra]
    if overrides:
        layers.append(("overrides", dict(overrides)))
    return layers


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
