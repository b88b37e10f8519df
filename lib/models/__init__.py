"""Models behind one interface: build a spec, call ``generate`` through the call cache.

>>> from lib.models import Request, Constraint, load_model, generate
>>> model = load_model({"backend": "tiny", "name": "llava"})          # nothing loads yet
>>> reqs = [Request.simple("Is there a red circle?", [img], constraint=Constraint(choices=("yes", "no")))]
>>> responses = generate(model, reqs, store=CallStore.default())        # cached, resumable

Backends: ``hf`` (transformers, any hub id or local path), ``openai`` (any OpenAI-compatible
endpoint, vLLM included), ``tiny`` (the embedded offline models of :mod:`lib.models.tiny`),
``constant`` and ``random`` (the baselines of :mod:`lib.models.baseline`), ``imported`` (answers
another harness produced, :mod:`lib.models.imported`: never asked). Each is a
:class:`~lib.models.backend.Model` subclass that declares the spec keys it reads, checks its spec and
its own preflight (what it needs reachable before a run starts; the probes are in
:mod:`lib.models.probe`), and registers itself by name (:func:`lib.models.backend.backend`): adding one
is its module and its import below.
"""

from __future__ import annotations

from lib.config import ParamsError
from lib.core.answers import parse_choice, parse_json, parse_response
from lib.core.schema import Constraint, Request, Response
from lib.models.backend import BACKENDS, Model
from lib.models.runner import generate

# the backends, each registering itself by name (lib.models.backend.backend); their heavy libraries
# (torch, transformers, openai) are imported when a model loads, not here
from lib.models import api, baseline, hf, imported, tiny  # noqa: E402,F401  isort: skip


def check_spec(spec, where: str, allow_empty: bool = False) -> type[Model] | None:
    """The backend of a model spec, which checked it: a mapping naming a registered ``backend``,
    then that backend's :meth:`~lib.models.backend.Model.check_spec` (its keys and values), the
    one place that says what its spec holds. Every caller (stage configs, the profile's models,
    the preflight, :func:`load_model`) checks through here; a bad spec raises
    :class:`~lib.config.ParamsError` naming ``where``. ``allow_empty``: ``{}`` / None mean "no
    model" (None returned)."""
    if allow_empty and spec in ({}, None):
        return None
    if not isinstance(spec, dict):
        raise ParamsError(f"{where} must be a model spec (a mapping with 'backend'), got {spec!r}")
    cls = BACKENDS.get(spec.get("backend"))
    if cls is None:
        raise ParamsError(
            f"{where}.backend must be one of {tuple(BACKENDS)}, got {spec.get('backend')!r}"
        )
    cls.check_spec(spec, where)
    return cls


def load_model(spec: dict) -> Model:
    """A lazily loaded model from a spec dict such as ``{backend: hf, name: ..., dtype: bfloat16}``,
    checked first (a spec built in code is refused as one read from params)."""
    return check_spec(spec, "model spec")(spec)


__all__ = [
    "BACKENDS",
    "Constraint",
    "Model",
    "Request",
    "Response",
    "check_spec",
    "generate",
    "load_model",
    "parse_choice",
    "parse_json",
    "parse_response",
]
