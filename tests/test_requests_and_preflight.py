"""One door each: a request is built in one place (:mod:`lib.eval.requests`), so what a comparison
says an item was asked is what evaluation sent; and the preflight asks each backend what it needs
(:meth:`lib.models.backend.Model.preflight`), so a backend registered here, unknown to
``lib/pipeline/preflight.py``, is asked like the shipped ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.compare.evaluations import request_parts
from lib.core.schema import image_sha256
from lib.eval.ask import predict
from lib.eval.settings import EvalConfig
from lib.io import load_items
from lib.models import BACKENDS, Model, load_model
from lib.models.backend import backend
from lib.models.store import call_key
from lib.pipeline import execute as pipeline
from lib.pipeline import preflight
from lib.stages.setup import demo_datasets
from lib.tasks import style_prompts

# a closed answer set (constrained unless switched off) and free text
DATASETS = ("mcq", "vqa")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    return demo_datasets(tmp_path_factory.mktemp("requests") / "demo")


def _sent_parts(req) -> dict:
    """A sent request's first user message in parts, read here apart from the code under test."""
    content = req.messages[0]["content"]
    return {
        "texts": [p["text"] for p in content if p["type"] == "text"],
        "images": [image_sha256(p["image"]) for p in content if p["type"] == "image"],
        "layout": [p["type"] for p in content],
    }


def _asked(data, spec: dict, style: str, constrain: bool = True):
    """``(cfg, [(dataset, item, prediction, what the model was sent for its answer, what it was
    sent before it)])``: five items of each dataset put to a rule-based model by stage 06's
    :func:`predict`, every request the model received recorded."""
    cfg = EvalConfig(
        datasets={k: str(data[k]) for k in DATASETS},
        models={"m": spec},
        styles=[style],
        max_new_tokens=6,
        cot_max_new_tokens=9,
        seed=3,
        constrain=constrain,
    )
    model, sent = load_model(spec), []
    answer = model._generate
    model._generate = lambda reqs, on_result: sent.extend(reqs) or answer(reqs, on_result)
    out = []
    for name in DATASETS:
        items = load_items(data[name])[:5]
        preds = predict("m", model, items, data[name], style, cfg, progress=False, dataset=name)
        by_key = {call_key(model.fingerprint, r): r for r in sent}
        for it, p in zip(items, preds):
            out.append((name, it, p, by_key[p.call_key], sent[: sent.index(by_key[p.call_key])]))
    return cfg, out


@pytest.mark.parametrize("question_first", [True, False])
@pytest.mark.parametrize("constrain", [True, False])
def test_comparison_describes_the_zero_shot_request_evaluation_sent(
    data, question_first, constrain
):
    spec = {"backend": "constant", "answer": "A", "question_first": question_first}
    cfg, asked = _asked(data, spec, "zero_shot", constrain)
    constrained = 0
    for name, it, _, req, _ in asked:
        parts = request_parts(cfg, it, name, spec, "zero_shot")
        assert {k: parts[k] for k in ("texts", "images", "layout")} == _sent_parts(req), it.id
        assert (parts["token limit"], parts["seed"]) == (req.max_new_tokens, req.seed) == (6, 3)
        sent = req.constraint.to_dict() if req.constraint else None
        assert parts["constraint"] == sent
        constrained += sent is not None
        assert parts["layout"][0 if question_first else -1] == "text"
        assert parts["style texts"] is None and parts["reasoning limit"] is None
    # the closed answer sets (mcq) were constrained when asked to be, the free texts never
    assert constrained == (5 if constrain else 0)


def test_comparison_describes_what_chain_of_thought_sent(data):
    spec = {"backend": "constant", "answer": "A"}
    cfg, asked = _asked(data, spec, "cot")
    trigger = style_prompts()["cot"]["reasoning_trigger"]
    for name, it, p, req, before in asked:
        parts = request_parts(cfg, it, name, spec, "cot")
        reasoning = next(r for r in before if r.messages == req.messages[:1])
        sent = _sent_parts(reasoning)
        assert sent["texts"] == [f"{t}\n{trigger}" for t in parts["texts"]], it.id
        assert (sent["images"], sent["layout"]) == (parts["images"], parts["layout"])
        assert reasoning.max_new_tokens == parts["reasoning limit"] == 9
        assert (req.max_new_tokens, req.seed) == (parts["token limit"], parts["seed"])
        assert (req.constraint.to_dict() if req.constraint else None) == parts["constraint"]
        assert parts["style texts"] == style_prompts()["cot"] and p.style == "cot"


@pytest.fixture
def probed():
    """A backend registered by a test, as a new backend module registers itself; it says whether
    it was asked, by spec and offline flag."""
    asked = []

    @backend("probed_by_a_test")
    class Probed(Model):
        SPEC_KEYS = frozenset({"reachable"})

        @classmethod
        def preflight(cls, spec: dict, offline: bool) -> str | None:
            asked.append((spec["name"], offline))
            if spec.get("reachable"):
                return None
            return f"{spec['name']} is not there (offline={offline})"

    yield asked
    BACKENDS.pop("probed_by_a_test")


def test_the_preflight_asks_a_backend_lib_preflight_never_names(tmp_path, probed):
    (tmp_path / "common.p.yaml").write_text(
        "run: pre\nstages: [06_evaluate]\nmodels:\n"
        "  gone: {backend: probed_by_a_test, name: gone-model}\n"
        "  here: {backend: probed_by_a_test, name: here-model, reachable: true}\n"
    )
    (tmp_path / "06_evaluate.p.yaml").write_text("models: {gone: gone, here: here}\n")
    steps = pipeline.plan("p", params_dir=tmp_path).steps
    for offline in (True, False):
        probed.clear()
        lines = [x for x in preflight.check(steps, offline) if "probed" in x or "-model" in x]
        assert lines == [
            f"model 'gone' (gone-model) (common.p.yaml models.gone): gone-model is not there "
            f"(offline={offline})"
        ]
        assert sorted(probed) == [("gone-model", offline), ("here-model", offline)]


def test_a_backend_built_here_has_nothing_to_reach_though_it_extends_hf():
    """``tiny`` is the ``hf`` backend over a folder it builds: it does not inherit hf's hub check."""
    assert preflight.problem({"backend": "tiny", "name": "llava"}, offline=True) is None
    hf = preflight.problem({"backend": "hf", "name": "no-such-org/no-such-model"}, offline=True)
    assert "not in the local hub cache" in hf and "the profile is offline" in hf
    assert "must be one of" in preflight.problem({"backend": "gone", "name": "x"}, offline=True)
