"""Profiles: ``params/common.<profile>.yaml`` read and checked - the stages a profile runs, its named
models, offline or not, the fields its stages share, the profile it extends."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lib.config.checks import check_type
from lib.config.errors import ParamsError, did_you_mean
from lib.config.files import load_layer
from lib.core.paths import check_name, params_root
from lib.io import artifacts

# Keys of params/common.<profile>.yaml that describe the profile rather than set a stage field.
PROFILE_KEYS = ("run", "stages", "models", "offline", "extends", "cluster")
# What an offline profile sets before anything loads a model: a stray hub call fails in milliseconds.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


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
