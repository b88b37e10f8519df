"""Models behind one interface: build a spec, call ``generate`` through the call cache.

>>> from lib.models import Request, Constraint, load_model, generate
>>> model = load_model({"backend": "tiny", "name": "llava"})          # nothing loads yet
>>> reqs = [Request.simple("Is there a red circle?", [img], constraint=Constraint(choices=("yes", "no")))]
>>> responses = generate(model, reqs, store=CallStore.default())        # cached, resumable

Backends: ``hf`` (transformers, any hub id or local path), ``openai`` (any OpenAI-compatible
endpoint, vLLM included), ``tiny`` (the embedded offline models of :mod:`lib.models.tiny`),
``constant`` and ``random`` (the baselines of :mod:`lib.models.baseline`).
"""

from __future__ import annotations

from lib.answers import parse_choice, parse_json, parse_response
from lib.models.base import Model
from lib.models.runner import generate
from lib.schema import Constraint, Request, Response

BACKENDS = ("hf", "openai", "tiny", "constant", "random")


def load_model(spec: dict) -> Model:
    """A lazily loaded model from a spec dict such as ``{backend: hf, name: ..., dtype: bfloat16}``."""
    if not isinstance(spec, dict) or "backend" not in spec:
        raise ValueError(f"a model spec is a dict with a 'backend' key ({', '.join(BACKENDS)}), got {spec!r}")
    backend = spec["backend"]
    # each backend's module is imported when a spec asks for it (deferred on purpose: a run loads only
    # the backends it uses, and lib.models.hf / tiny import this package's base)
    if backend == "hf":
        from lib.models.hf import HFModel

        return HFModel(spec)
    if backend == "tiny":
        from lib.models.tiny import TinyModel

        return TinyModel(spec)
    if backend == "openai":
        from lib.models.api import OpenAIModel

        return OpenAIModel(spec)
    if backend in ("constant", "random"):
        from lib.models.baseline import ConstantModel, RandomModel

        return (ConstantModel if backend == "constant" else RandomModel)(spec)
    raise ValueError(f"unknown model backend {backend!r} in spec {spec}; choose one of {BACKENDS}")


__all__ = ["BACKENDS", "Constraint", "Model", "Request", "Response", "generate", "load_model",
           "parse_choice", "parse_json", "parse_response"]
