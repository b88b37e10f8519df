"""Stage configs and profiles: one dataclass per stage is the single source of its defaults.

nanoGPT's configurator, for a pipeline: the dataclass holds the defaults (each knob with a *why*
comment), then a *profile* overrides it - ``params/common.<profile>.yaml`` (the profile's stages, its
named models, offline or not, and fields every stage shares, such as ``seed``), then
``params/NN_stage.<profile>.yaml`` - then the overrides of a notebook or a command line. Every value
is checked against the field's annotation by pydantic, strictly - nested ones too (``list[str]``,
``dict[str, dict]``, model specs) - and an error names the file and the key at fault, with a "did
you mean" for a misspelt key. :func:`resolve` does this once, for the notebooks, the pipeline and the command line
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

The package's modules, each named for its job: :mod:`~lib.config.errors` (:class:`ParamsError`),
:mod:`~lib.config.checks` (values against annotations), :mod:`~lib.config.files` (params YAML),
:mod:`~lib.config.profile` (``common.<profile>.yaml``), :mod:`~lib.config.stage` (what every stage
config is), :mod:`~lib.config.resolution` (:func:`resolve`); their public names are importable from
here.
"""

from lib.config.checks import check_fields, check_type, dataclass_from, field_types
from lib.config.errors import ParamsError, did_you_mean, short
from lib.config.files import load_layer, parse_yaml
from lib.config.profile import OFFLINE_ENV, PROFILE_KEYS, Profile, load_profile, profiles
from lib.config.resolution import Resolved, resolve
from lib.config.stage import (
    StageConfig,
    bind_models,
    check_values,
    finish,
    replaced,
    stage_run,
)

__all__ = [
    "OFFLINE_ENV",
    "PROFILE_KEYS",
    "ParamsError",
    "Profile",
    "Resolved",
    "StageConfig",
    "bind_models",
    "check_fields",
    "check_type",
    "check_values",
    "dataclass_from",
    "did_you_mean",
    "field_types",
    "finish",
    "load_layer",
    "load_profile",
    "parse_yaml",
    "profiles",
    "replaced",
    "resolve",
    "short",
    "stage_run",
]
