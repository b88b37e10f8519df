"""The spec of a model whose answers another harness produced (issue #46, foreign runs).

``{backend: imported, harness: lmms-eval, name: <its model>, ...}`` is what
:mod:`lib.eval.foreign` writes into an imported evaluation folder's ``config.json``: the model
lmms-eval ran, as lmms-eval recorded it (its model class, ``model_args``, whether it took the chat
or the simple path, its decoding settings). The comparison (:mod:`lib.compare.explain`) names these
keys when the replies differ. Such a model cannot be asked from VQA Lab: its answers are the
harness's, imported; asking it again raises.
"""

from __future__ import annotations

from lib.config import ParamsError
from lib.models.backend import Model, backend


@backend("imported")
class ImportedModel(Model):
    SPEC_KEYS = frozenset(
        {"harness", "harness_version", "model", "model_args", "path", "generation"}
    )

    @classmethod
    def check_spec(cls, spec: dict, where: str) -> None:
        super().check_spec(spec, where)
        if not isinstance(spec.get("harness"), str):
            raise ParamsError(
                f"{where}.harness must name the harness whose answers were imported (lmms-eval), got "
                f"{spec.get('harness')!r}"
            )

    def _load(self) -> None:
        raise RuntimeError(
            f"model {self.name!r} stands for answers imported from {self.spec['harness']}: VQA Lab "
            f"cannot ask it; run {self.spec['harness']} again and import its output "
            f"(python -m lib.compare, docs/compare.md)"
        )
