"""The base class every backend implements: lazily loaded weights, ``generate(requests)``, the
spec it reads (:attr:`Model.SPEC_KEYS`, :meth:`Model.check_spec`) and what it needs reachable
before a run starts (:meth:`Model.preflight`). A backend registers itself by name with
:func:`backend`; ``lib.models`` imports each backend module, so a new backend is one module and one
line there.

The request/response records live in :mod:`lib.core.schema` (below the call store and the backends);
the parsers that read raw text live in :mod:`lib.core.answers`.
"""

from __future__ import annotations

from typing import ClassVar

from lib.config import ParamsError, did_you_mean
from lib.core.schema import Request, Response, fingerprint

# keys every spec may hold, whatever its backend: the tasks read question_first
COMMON_SPEC_KEYS = frozenset({"backend", "name", "label", "question_first"})
# name -> class, filled by @backend as each module is imported
BACKENDS: dict[str, type[Model]] = {}


def backend(name: str):
    """Register a :class:`Model` subclass as the backend ``name`` of model specs."""

    def register(cls: type[Model]) -> type[Model]:
        if name in BACKENDS and BACKENDS[name] is not cls:
            raise ValueError(
                f"backend {name!r} is registered twice ({BACKENDS[name].__name__}, {cls.__name__})"
            )
        BACKENDS[name] = cls
        return cls

    return register


class Model:
    """Base class of the backends. Subclasses implement ``_load()`` and ``_generate(requests)``.

    Weights load lazily on the first call, so building a notebook or a test costs nothing until a
    model is used. ``batch_size`` is how many requests a backend wants per call to ``generate``.
    """

    batch_size: int = 8
    # what this backend reads of a spec, beside COMMON_SPEC_KEYS
    SPEC_KEYS: ClassVar[frozenset] = frozenset()

    @classmethod
    def check_spec(cls, spec: dict, where: str) -> None:
        """Refuse a spec this backend cannot use (:class:`lib.config.ParamsError` naming ``where``):
        here, a key it does not read (a misspelt one with a suggestion) or a key itself; a backend
        adds its own rules after ``super().check_spec``. Reached through :func:`lib.models.check_spec`,
        which finds the backend."""
        if "api_key" in spec:
            raise ParamsError(
                f"{where}: put the *name* of an environment variable in 'api_key_env', never a key"
            )
        keys = COMMON_SPEC_KEYS | cls.SPEC_KEYS
        unknown = sorted(set(spec) - keys)
        if unknown:
            raise ParamsError(
                f"{where}: unknown key {unknown[0]!r} for a {spec['backend']} model"
                f"{did_you_mean(unknown[0], keys)} (keys: {', '.join(sorted(keys))})"
            )

    @classmethod
    def preflight(cls, spec: dict, offline: bool) -> str | None:
        """Why a model of ``spec`` cannot be loaded or reached here (weights, a server, a key), in
        one line saying the fix, or None; ``offline``: the profile's. :mod:`lib.pipeline.preflight` asks it
        before a run computes anything. Nothing to reach by default (a model built or ruled here)."""
        return None

    @staticmethod
    def _needs_name(spec: dict, where: str) -> None:
        if not isinstance(spec.get("name"), str):
            raise ParamsError(
                f"{where}.name must name the model (hub id, folder or served name), got {spec.get('name')!r}"
            )

    def __init__(self, spec: dict):
        self.spec = dict(spec)
        self._loaded = False

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.spec)

    @property
    def name(self) -> str:
        return str(self.spec.get("label") or self.spec.get("name") or self.spec.get("backend"))

    def load(self) -> Model:
        if not self._loaded:
            self._load()
            self._loaded = True
        return self

    def generate(self, requests: list[Request], on_result=None) -> list[Response]:
        """Answer a batch; ``on_result(i, response)`` is called as each answer completes."""
        self.load()
        return self._generate(list(requests), on_result)

    def _load(self) -> None:
        raise NotImplementedError

    def _generate(self, requests: list[Request], on_result) -> list[Response]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, loaded={self._loaded})"
