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

from lib.config import ParamsError, did_you_mean
from lib.core.answers import parse_choice, parse_json, parse_response
from lib.core.schema import Constraint, Request, Response
from lib.models.backend import BACKENDS, COMMON_SPEC_KEYS, Model
from lib.models.runner import generate

# the backends, each registering itself by name (lib.models.backend.backend); their heavy libraries
# (torch, transformers, openai) are imported when a model loads, not here
from lib.models import api, baseline, hf, imported, tiny  # noqa: E402,F401  isort: skip


def check_spec(spec, where: str, allow_empty: bool = False) -> None:
    """A model spec: a mapping naming a registered ``backend``, holding only the keys that backend
    reads (a misspelt one is refused with a suggestion), never a key itself, and passing the
    backend's own :meth:`~lib.models.backend.Model.check_spec`. ``allow_empty``: ``{}`` / None mean
    "no model"."""
    if allow_empty and spec in ({}, None):
        return
    if not isinstance(spec, dict):
        raise ParamsError(f"{where} must be a model spec (a mapping with 'backend'), got {spec!r}")
    if "api_key" in spec:
        raise ParamsError(
            f"{where}: put the *name* of an environment variable in 'api_key_env', never a key"
        )
    cls = BACKENDS.get(spec.get("backend"))
    if cls is None:
        raise ParamsError(
            f"{where}.backend must be one of {tuple(BACKENDS)}, got {spec.get('backend')!r}"
        )
    keys = COMMON_SPEC_KEYS | cls.SPEC_KEYS
    unknown = sorted(set(spec) - keys)
    if unknown:
        raise ParamsError(
            f"{where}: unknown key {unknown[0]!r} for a {spec['backend']} model"
            f"{did_you_mean(unknown[0], keys)} (keys: {', '.join(sorted(keys))})"
        )
    cls.check_spec(spec, where)


def load_model(spec: dict) -> Model:
    """A lazily loaded model from a spec dict such as ``{backend: hf, name: ..., dtype: bfloat16}``."""
    if not isinstance(spec, dict) or spec.get("backend") not in BACKENDS:
        raise ValueError(
            f"a model spec is a dict whose 'backend' is one of {', '.join(BACKENDS)}, got {spec!r}"
        )
    return BACKENDS[spec["backend"]](spec)


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
