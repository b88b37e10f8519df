"""The openai backend with the real openai client against a real HTTP server on 127.0.0.1."""

import base64
import contextlib
from dataclasses import replace

import pytest

from lib.models import Constraint, Request, generate, load_model
from lib.models.store import CallStore

from .support.openai_server import OpenAIStub


@pytest.fixture
def server():
    with OpenAIStub(stall_s=3) as s:
        yield s


def _model(server, **kw):
    spec = {
        "backend": "openai",
        "name": "stub-vlm",
        "base_url": server.url,
        "api_key_env": "VQALAB_TEST_KEY",
        "concurrency": 4,
        "max_retries": 3,
        "timeout_s": 1.5,
        **kw,
    }
    return load_model(spec)


def test_retries_where_it_should_and_records_what_cannot_succeed(server, monkeypatch):
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-test-123")
    schema = {
        "type": "object",
        "properties": {"rating": {"type": "integer"}},
        "required": ["rating"],
    }
    reqs = [
        Request.simple("rate limited [[429x2]]", constraint=Constraint(choices=("yes", "no"))),
        Request.simple("server error [[500x1]]"),
        Request.simple("slow [[timeoutx1]]"),
        Request.simple("broken json [[malformed]]", constraint=Constraint(json_schema=schema)),
        Request.simple("down for good [[always500]]"),
        Request.simple("plain"),
    ]
    rl, err, slow, bad, down, plain = generate(_model(server), reqs, progress=False)
    assert (rl.parsed, rl.method, rl.valid) == ("yes", "json_schema", True)
    assert server.attempts["rate limited [[429x2]]"] == 3
    assert err.valid and server.attempts["server error [[500x1]]"] == 2
    assert slow.valid and server.attempts["slow [[timeoutx1]]"] == 2
    # malformed structured output: kept raw, counted invalid, not retried or guessed
    assert (bad.parsed, bad.method, bad.valid, bad.text) == (
        None,
        "invalid",
        False,
        '{"answer": "yes", ',
    )
    assert server.attempts["broken json [[malformed]]"] == 1
    assert down.method == "error" and not down.valid and "500" in down.error
    assert server.attempts["down for good [[always500]]"] == 4  # first try + 3 retries
    assert plain.text == "echo: plain"


def test_key_comes_from_the_named_variable_and_never_from_the_spec(server, monkeypatch):
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-secret-value")
    generate(_model(server), [Request.simple("hello")], progress=False)
    assert server.auth_headers == {"Bearer sk-secret-value"}
    with pytest.raises(ValueError, match="api_key_env"):
        load_model({"backend": "openai", "name": "x", "api_key": "sk-oops"})


def test_missing_key_fails_before_any_request(monkeypatch):
    monkeypatch.delenv("VQALAB_MISSING_KEY", raising=False)
    model = load_model({"backend": "openai", "name": "gpt-4o", "api_key_env": "VQALAB_MISSING_KEY"})
    with pytest.raises(RuntimeError, match="VQALAB_MISSING_KEY"):
        generate(model, [Request.simple("hi")], progress=False)


def test_concurrency_limit_is_honoured(server):
    server.delay_s = 0.1
    generate(
        _model(server, concurrency=3), [Request.simple(f"q{i}") for i in range(12)], progress=False
    )
    assert server.max_in_flight == 3


def test_images_travel_as_data_urls_and_usage_and_cost_are_recorded(server, images, tmp_path):
    model = _model(server, price_per_1m_input=2.0, price_per_1m_output=8.0)
    store = CallStore(tmp_path / "calls.sqlite")
    r = generate(
        model, [Request.simple("what is this?", [images[0]])], store=store, progress=False
    )[0]
    url = server.bodies[-1]["messages"][-1]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == images[0].read_bytes()
    assert (r.prompt_tokens, r.completion_tokens) == (110, 5)
    assert r.cost_usd == pytest.approx((110 * 2.0 + 5 * 8.0) / 1e6)
    again = generate(
        model, [Request.simple("what is this?", [images[0]])], store=store, progress=False
    )
    assert again.n_cached == 1 and again[0].cost_usd == r.cost_usd


class _WrappedModel(OpenAIStub):
    """A model outside transformers served the way the README tells MiniGPT-4 users to: a small
    OpenAI-compatible server around its own answer function (here the tiny LLaVA's, a stand-in)."""

    def __init__(self, answer):
        super().__init__()
        self.answer = answer

    async def _chat(self, request):
        import io

        from aiohttp import web
        from PIL import Image

        body = await request.json()
        self.bodies.append(body)
        parts = body["messages"][-1]["content"]
        text = " ".join(p["text"] for p in parts if p.get("type") == "text")
        images = [
            Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1])))
            for p in parts
            if p.get("type") == "image_url"
        ]
        content = self.answer(text, images, body.get("max_tokens") or 8)
        return web.json_response(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )


def test_a_model_outside_transformers_is_evaluated_through_its_own_server(
    tiny_llava, images, monkeypatch
):
    monkeypatch.setenv("MINIGPT4_KEY", "sk-local")

    def answer(text, imgs, max_tokens):  # what a wrapper around MiniGPT-4's Chat.answer would do
        return generate(
            tiny_llava, [Request.simple(text, imgs, max_new_tokens=max_tokens)], progress=False
        )[0].text

    reqs = [
        Request.simple(
            f"Question {i}: what colour is the shape?", [images[i % len(images)]], max_new_tokens=5
        )
        for i in range(4)
    ]
    with _WrappedModel(answer) as server:
        served = load_model(
            {
                "backend": "openai",
                "name": "minigpt4",
                "base_url": server.url,
                "api_key_env": "MINIGPT4_KEY",
            }
        )
        got = generate(served, reqs, progress=False)
    assert len(server.bodies) == 4 and all(b["model"] == "minigpt4" for b in server.bodies)
    assert [r.text for r in got] == [
        r.text for r in generate(tiny_llava, reqs, progress=False)
    ]  # what the model says


def test_every_schema_the_project_sends_compiles_on_vllm_engines():
    """Closed objects, anchored patterns, repeat counts xgrammar accepts: the AF options schema for
    every option count stage 03 asks for and the choice schema every closed answer set becomes."""
    from lib.af.generation import options_schema
    from lib.models.openai_format import response_format, schema_problems

    def sent_for(constraint):
        return response_format(Request.simple("q", constraint=constraint))["json_schema"]["schema"]

    sent = [sent_for(Constraint(json_schema=options_schema(n))) for n in range(1, 6)]
    sent += [
        sent_for(Constraint(choices=c))
        for c in (("yes", "no"), ("A", "B", "C", "D"), ("1", "2", "3"))
    ]
    assert all(schema_problems(s) == [] for s in sent), [schema_problems(s) for s in sent]
    # and the check itself finds what the engines trip on, naming where
    loose = {
        "type": "object",
        "properties": {
            "o": {
                "type": "array",
                "items": {"type": "string", "pattern": "[a-z]{1,160}", "maxLength": 300},
            }
        },
    }
    problems = schema_problems(loose)
    assert problems[0] == "$: object without additionalProperties: false"
    assert any("$.properties.o.items.pattern: not anchored" in p for p in problems)
    assert any("repeat count 160 > 128" in p for p in problems)
    assert any("pattern with minLength/maxLength" in p for p in problems)


def test_a_grammar_failure_is_not_retried_a_plain_500_is(server):
    reqs = [
        Request.simple(
            "schema too big [[grammar500]]", constraint=Constraint(choices=("yes", "no"))
        ),
        Request.simple("flaky [[500x1]]"),
    ]
    bad, flaky = generate(_model(server), reqs, progress=False)
    assert server.attempts["schema too big [[grammar500]]"] == 1
    assert bad.method == "error" and not bad.valid and "xgrammar" in bad.error
    assert flaky.valid and server.attempts["flaky [[500x1]]"] == 2


def test_cache_key_knows_what_the_server_serves():
    """Same URL and name, other weights behind it (vLLM's /v1/models root) or another label: other
    keys, so no cached answer of one setup is served for another."""
    from lib.core.schema import fingerprint

    served = {"id": "stub-vlm", "root": "/models/a", "max_model_len": 2048}
    with OpenAIStub(models=[served, {"id": "other", "root": "/models/c"}]) as s:
        a = _model(s)
        assert a.server_identity() == served
        fp_a = a.fingerprint
        assert _model(s).fingerprint == fp_a  # stable for one setup
        assert _model(s, label="guidance-engine").fingerprint != fp_a
        s.models = [{**served, "root": "/models/b"}]
        fp_b = _model(s).fingerprint
        s.models = [{**served, "max_model_len": 4096}]
        fp_len = _model(s).fingerprint
        s.models = None  # a server without /v1/models: the spec alone, as before
        bare = _model(s)
        assert bare.server_identity() == {}
        assert len({fp_a, fp_b, fp_len, bare.fingerprint}) == 4
        assert bare.fingerprint == fingerprint(
            {"backend": "openai", "name": "stub-vlm", "base_url": s.url}
        )


def test_a_reply_is_checked_against_the_whole_schema_not_only_what_the_server_enforced(server):
    """The options' maxLength stays out of what the server gets (xgrammar refuses it beside a
    pattern) and is checked here: an over-long option is invalid, kept raw."""
    from lib.af.generation import OPTION_MAX_LENGTH, options_schema
    from lib.models.openai_format import response_format

    c = Constraint(json_schema=options_schema(1))
    assert (
        "maxLength"
        not in response_format(Request.simple("q", constraint=c))["json_schema"]["schema"][
            "properties"
        ]["options"]["items"]
    )
    long = "a" * (OPTION_MAX_LENGTH + 1)
    ok, too_long = generate(
        _model(server),
        [
            Request.simple('[[reply:{"options": ["A fine option"]}]]', constraint=c),
            Request.simple(f'[[reply:{{"options": ["{long}"]}}]]', constraint=c),
        ],
        progress=False,
    )
    assert (ok.valid, ok.parsed) == (True, {"options": ["A fine option"]})
    assert (too_long.valid, too_long.method, too_long.parsed) == (
        False,
        "invalid",
        None,
    ) and long in too_long.text


# --- several servers behind one spec (data parallelism) -----------------------------------------


@pytest.fixture
def refused_url():
    """A server that refuses connections: a port bound, never listening (no one else can take it)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def _servers(base_url, **kw):
    return load_model(
        {
            "backend": "openai",
            "name": "stub-vlm",
            "base_url": base_url,
            "api_key_env": "VQALAB_TEST_KEY",
            "concurrency": 2,
            "max_retries": 3,
            "timeout_s": 1.5,
            **kw,
        }
    )


def _as_answered(responses):
    return [replace(r, latency_s=0.0) for r in responses]


def test_the_pool_picks_the_least_busy_untried_server_and_passes_over_a_failed_one():
    from lib.models.api import ServerPool

    pool = ServerPool(3, cooldown=2)
    assert [pool.pick(), pool.pick()] == [0, 0]  # nothing in flight: ties go to the first
    pool.in_flight[:] = [2, 1, 1]
    assert pool.pick() == 1
    assert pool.pick(tried={1}) == 2  # a request's untried servers first, however busy
    assert pool.pick(tried={0, 1, 2}) == 1  # all tried: all again
    pool.in_flight[:] = [0, 0, 0]
    pool.failed(0)  # passed over for the next 2 picks, then back
    assert [pool.pick(), pool.pick(), pool.pick()] == [1, 1, 0]
    every = ServerPool(2, cooldown=5)
    every.failed(1)
    assert every.pick() == 0
    every.failed(0)
    assert every.pick() == 1  # every server cooling down: the one whose cool-down ends first
    assert every.sent == [1, 1] and every.failures == [1, 1]


def test_two_servers_share_one_spec_by_requests_in_flight():
    reqs = [Request.simple(f"q{i}") for i in range(16)]
    with OpenAIStub(delay_s=0.05) as a, OpenAIStub(delay_s=0.05) as b:
        got = generate(_servers([a.url, b.url], concurrency=2), reqs, progress=False)
    assert [r.text for r in got] == [f"echo: q{i}" for i in range(16)]
    assert len(a.bodies) + len(b.bodies) == 16
    assert len(a.bodies) >= 4 and len(b.bodies) >= 4  # neither gets everything
    # 2 per server, 4 in flight: the fewest-in-flight rule never puts a third on one while the other has one
    assert a.max_in_flight <= 2 and b.max_in_flight <= 2


@pytest.mark.parametrize("broken", ["refused", "500", "stalls"])
def test_a_broken_server_costs_no_answer_and_changes_no_key(broken, refused_url):
    from lib.models.store import call_key

    reqs = [
        Request.simple(f"q{i}", constraint=Constraint(choices=("yes", "no")) if i % 2 else None)
        for i in range(12)
    ]
    bad = {"refused": None, "500": OpenAIStub(status=500), "stalls": OpenAIStub(delay_s=2)}[broken]
    with OpenAIStub() as good, bad or contextlib.nullcontext():
        bad_url = refused_url if bad is None else bad.url
        alone, both = _servers([good.url]), _servers([bad_url, good.url], timeout_s=0.5)
        expected = generate(alone, reqs, progress=False)
        got = generate(both, reqs, progress=False)
        assert len(good.bodies) == 2 * len(
            reqs
        )  # every request answered by the good server, in both runs
    assert all(r.valid for r in got) and _as_answered(got) == _as_answered(expected)
    assert [call_key(both.fingerprint, r) for r in reqs] == [
        call_key(alone.fingerprint, r) for r in reqs
    ]
    assert both.pool.failures[0] >= 1 and both.pool.failures[1] == 0
    if (
        bad is not None
    ):  # asked at most once per request (the first pick ties to it), then passed over
        assert (
            bad.attempts
            and set(bad.attempts.values()) == {1}
            and sum(bad.attempts.values()) < len(reqs)
        )


def test_each_server_once_then_the_retry_policy(refused_url):
    """A request every server fails: one attempt on each, then the client's max_retries (with backoff)."""
    with OpenAIStub() as a, OpenAIStub() as b:
        down, flaky = generate(
            _servers([a.url, b.url], max_retries=1),
            [Request.simple("down [[always500]]"), Request.simple("flaky [[500x1]]")],
            progress=False,
        )
        assert down.method == "error" and "500" in down.error
        assert a.attempts["down [[always500]]"] >= 1 and b.attempts["down [[always500]]"] >= 1
        assert (
            a.attempts["down [[always500]]"] + b.attempts["down [[always500]]"] == 2 + 1
        )  # servers + max_retries
        # fails once on each server (its markers count per server), then the retry is answered
        assert flaky.valid and a.attempts["flaky [[500x1]]"] + b.attempts["flaky [[500x1]]"] == 3
        # with no retries a request still gets each server once: failing over is not retrying one server
        ok = generate(
            _servers([refused_url, a.url], max_retries=0), [Request.simple("hello")], progress=False
        )[0]
        assert ok.text == "echo: hello"


def test_a_list_of_servers_keys_its_cache_by_the_model_not_by_where_it_runs(tmp_path, refused_url):
    """The rule (lib/models/api.py): servers of one list are interchangeable, so a list's keys hold
    no URL - any order, servers added or dropped, the same keys; a single URL string keeps its URL
    in its keys as always (existing caches stay valid), so a list does not reuse its answers."""
    from lib.core.schema import fingerprint

    served = {"id": "stub-vlm", "root": "/models/a", "max_model_len": 2048}
    reqs = [Request.simple(f"q{i}") for i in range(6)]
    store = CallStore(tmp_path / "calls.sqlite")
    with (
        OpenAIStub(models=[served]) as a,
        OpenAIStub(models=[served]) as b,
        OpenAIStub(models=[served]) as c,
    ):
        first = generate(_servers([a.url, b.url]), reqs, store=store, progress=False)
        assert first.n_computed == 6
        for urls in ([b.url, a.url], [c.url], [c.url, a.url, b.url], [refused_url, b.url]):
            assert generate(_servers(urls), reqs, store=store, progress=False).n_cached == 6, urls
        assert not c.bodies
        single = _servers(a.url)
        assert single.fingerprint == fingerprint(
            {"backend": "openai", "name": "stub-vlm", "base_url": a.url, "served": served}
        )  # as before lists existed
        assert generate(single, reqs, store=store, progress=False).n_cached == 0
        with OpenAIStub(models=[{**served, "root": "/models/b"}]) as other:
            assert (
                _servers([other.url]).fingerprint != _servers([a.url]).fingerprint
            )  # other weights, other keys
            with pytest.raises(ValueError, match="serve different models"):
                _ = _servers([a.url, other.url]).fingerprint
    # servers that do not say what they serve: known by name and label, never taken for api.openai.com
    assert (
        _servers([refused_url]).fingerprint
        != load_model({"backend": "openai", "name": "stub-vlm"}).fingerprint
    )


@pytest.mark.parametrize(
    "base_url, message",
    [
        ([], "models.vlm.base_url must be a server's URL or a non-empty list"),
        (["http://127.0.0.1:8000/v1", ""], "models.vlm.base_url[1] must be a server's URL"),
        (["http://127.0.0.1:8000/v1", 8001], "models.vlm.base_url[1] must be a server's URL"),
        ({"url": "http://127.0.0.1:8000/v1"}, "models.vlm.base_url must be"),
        (["http://127.0.0.1:8000/v1"] * 2, "lists 'http://127.0.0.1:8000/v1' twice"),
    ],
)
def test_the_spec_check_takes_a_list_of_urls_and_names_the_key_at_fault(base_url, message):
    import re

    from lib.config import ParamsError
    from lib.models import check_spec as check_model_spec

    for ok in (
        "http://127.0.0.1:8000/v1",
        ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"],
    ):
        check_model_spec({"backend": "openai", "name": "m", "base_url": ok}, "models.vlm")
    with pytest.raises(ParamsError, match=re.escape(message)):
        check_model_spec({"backend": "openai", "name": "m", "base_url": base_url}, "models.vlm")
    with pytest.raises(ValueError, match="base_url"):  # a spec built in code is refused as early
        load_model({"backend": "openai", "name": "m", "base_url": base_url})


def test_the_preflight_asks_every_listed_server(refused_url):
    from lib.pipeline.preflight import problem

    with OpenAIStub(models=[{"id": "stub-vlm"}]) as a, OpenAIStub(models=[{"id": "stub-vlm"}]) as b:
        assert (
            problem({"backend": "openai", "name": "stub-vlm", "base_url": [a.url, b.url]}, False)
            is None
        )
        why = problem(
            {"backend": "openai", "name": "stub-vlm", "base_url": [a.url, refused_url, b.url]},
            False,
        )
    assert why.startswith("1 of the 3 servers of base_url: no server answers at " + refused_url)
