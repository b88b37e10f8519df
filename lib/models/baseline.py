"""Baseline backends: the floor every table can show beside real models.

- ``{backend: constant, answer: "no"}`` answers every request with the same text (read like any
  free answer: under a closed answer set it counts only when it names one of the choices).
- ``{backend: random, seed: 0}`` picks uniformly from a request's closed answer set (its choice
  constraint); a request without one gets no answer and is counted invalid, never guessed.
  The pick depends on the seed and the request itself (its text, images and choices), not on the
  order or batch the requests come in, so a rerun or a resumed run gives the same answers.

Hand-written because there is nothing to load: a baseline is a rule, not a model.
"""

from __future__ import annotations

import random

from lib.config import ParamsError
from lib.core.schema import CONSTRAINED_RANDOM, FREE, INVALID, Request, Response, fingerprint
from lib.models.backend import Model, backend


class _RuleModel(Model):
    """A baseline: nothing to load, one answer per request by :meth:`answer`."""

    batch_size = 1024

    def _load(self) -> None:
        pass

    def answer(self, request: Request) -> Response:
        raise NotImplementedError

    def _generate(self, requests: list[Request], on_result) -> list[Response]:
        out = []
        for i, req in enumerate(requests):
            out.append(self.answer(req))
            if on_result:
                on_result(i, out[-1])
        return out


@backend("constant")
class ConstantModel(_RuleModel):
    SPEC_KEYS = frozenset({"answer"})

    @classmethod
    def check_spec(cls, spec: dict, where: str) -> None:
        super().check_spec(spec, where)
        if not isinstance(spec.get("answer"), str):
            raise ParamsError(
                f"{where}.answer must be the text the constant baseline always gives, got "
                f"{spec.get('answer')!r}"
            )

    @property
    def name(self) -> str:
        return str(self.spec.get("label") or f"constant:{self.spec['answer']}")

    def answer(self, request: Request) -> Response:
        return Response(text=self.spec["answer"], method=FREE, finish_reason="stop")


@backend("random")
class RandomModel(_RuleModel):
    SPEC_KEYS = frozenset({"seed"})

    @classmethod
    def check_spec(cls, spec: dict, where: str) -> None:
        super().check_spec(spec, where)
        if not isinstance(spec.get("seed", 0), int) or isinstance(spec.get("seed", 0), bool):
            raise ParamsError(f"{where}.seed must be an integer, got {spec.get('seed')!r}")

    @property
    def name(self) -> str:
        return str(self.spec.get("label") or f"random:{self.spec.get('seed', 0)}")

    def answer(self, request: Request) -> Response:
        choices = request.constraint.choices if request.constraint is not None else None
        if not choices:
            return Response(text="", method=INVALID, valid=False)  # nothing to draw from: no answer
        pick = random.Random(
            f"{self.spec.get('seed', 0)}:{fingerprint(request.key_payload())}"
        ).choice(choices)
        return Response(text=pick, parsed=pick, method=CONSTRAINED_RANDOM, finish_reason="stop")
