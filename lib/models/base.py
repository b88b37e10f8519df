"""The base class every backend implements: lazily loaded weights, ``generate(requests)``.

The request/response records live in :mod:`lib.schema` (below the call store and the backends);
the parsers that read raw text live in :mod:`lib.answers`.
"""

from __future__ import annotations

from lib.schema import Request, Response, fingerprint


class Model:
    """Base class of the backends. Subclasses implement ``_load()`` and ``_generate(requests)``.

    Weights load lazily on the first call, so building a notebook or a test costs nothing until a
    model is used. ``batch_size`` is how many requests a backend wants per call to ``generate``.
    """

    batch_size: int = 8

    def __init__(self, spec: dict):
        self.spec = dict(spec)
        self._loaded = False

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.spec)

    @property
    def name(self) -> str:
        return str(self.spec.get("label") or self.spec.get("name") or self.spec.get("backend"))

    def load(self) -> "Model":
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
