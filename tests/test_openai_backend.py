"""The openai backend with the real openai client against a real HTTP server on 127.0.0.1."""

import base64

import pytest

from lib.models import Constraint, Request, generate, load_model
from lib.store import CallStore

from .support.openai_server import OpenAIStub


@pytest.fixture
def server():
    with OpenAIStub(stall_s=3) as s:
        yield s


def _model(server, **kw):
    spec = {"backend": "openai", "name": "stub-vlm", "base_url": server.url, "api_key_env": "VQALAB_TEST_KEY",
            "concurrency": 4, "max_retries": 3, "timeout_s": 1.5, **kw}
    return load_model(spec)


def test_retries_where_it_should_and_records_what_cannot_succeed(server, monkeypatch):
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-test-123")
    schema = {"type": "object", "properties": {"rating": {"type": "integer"}}, "required": ["rating"]}
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
    assert (bad.parsed, bad.method, bad.valid, bad.text) == (None, "invalid", False, '{"answer": "yes", ')
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
    generate(_model(server, concurrency=3), [Request.simple(f"q{i}") for i in range(12)], progress=False)
    assert server.max_in_flight == 3


def test_images_travel_as_data_urls_and_usage_and_cost_are_recorded(server, images, tmp_path):
    model = _model(server, price_per_1m_input=2.0, price_per_1m_output=8.0)
    store = CallStore(tmp_path / "calls.sqlite")
    r = generate(model, [Request.simple("what is this?", [images[0]])], store=store, progress=False)[0]
    url = server.bodies[-1]["messages"][-1]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == images[0].read_bytes()
    assert (r.prompt_tokens, r.completion_tokens) == (110, 5)
    assert r.cost_usd == pytest.approx((110 * 2.0 + 5 * 8.0) / 1e6)
    again = generate(model, [Request.simple("what is this?", [images[0]])], store=store, progress=False)
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
        images = [Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1])))
                  for p in parts if p.get("type") == "image_url"]
        content = self.answer(text, images, body.get("max_tokens") or 8)
        return web.json_response({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": content}}],
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


def test_a_model_outside_transformers_is_evaluated_through_its_own_server(tiny_llava, images, monkeypatch):
    monkeypatch.setenv("MINIGPT4_KEY", "sk-local")

    def answer(text, imgs, max_tokens):  # what a wrapper around MiniGPT-4's Chat.answer would do
        return generate(tiny_llava, [Request.simple(text, imgs, max_new_tokens=max_tokens)], progress=False)[0].text

    reqs = [Request.simple(f"Question {i}: what colour is the shape?", [images[i % len(images)]], max_new_tokens=5)
            for i in range(4)]
    with _WrappedModel(answer) as server:
        served = load_model({"backend": "openai", "name": "minigpt4", "base_url": server.url,
                             "api_key_env": "MINIGPT4_KEY"})
        got = generate(served, reqs, progress=False)
    assert len(server.bodies) == 4 and all(b["model"] == "minigpt4" for b in server.bodies)
    assert [r.text for r in got] == [r.text for r in generate(tiny_llava, reqs, progress=False)]  # what the model says


def test_every_schema_the_project_sends_compiles_on_vllm_engines():
    """Closed objects, anchored patterns, repeat counts xgrammar accepts: the AF options schema for
    every option count stage 03 asks for and the choice schema every closed answer set becomes."""
    from lib.af.engine import options_schema
    from lib.models.api import response_format, schema_problems

    def sent_for(constraint):
        return response_format(Request.simple("q", constraint=constraint))["json_schema"]["schema"]

    sent = [sent_for(Constraint(json_schema=options_schema(n))) for n in range(1, 6)]
    sent += [sent_for(Constraint(choices=c)) for c in (("yes", "no"), ("A", "B", "C", "D"), ("1", "2", "3"))]
    assert all(schema_problems(s) == [] for s in sent), [schema_problems(s) for s in sent]
    # and the check itself finds what the engines trip on, naming where
    loose = {"type": "object", "properties": {"o": {"type": "array", "items": {
        "type": "string", "pattern": "[a-z]{1,160}", "maxLength": 300}}}}
    problems = schema_problems(loose)
    assert problems[0] == "$: object without additionalProperties: false"
    assert any("$.properties.o.items.pattern: not anchored" in p for p in problems)
    assert any("repeat count 160 > 128" in p for p in problems)
    assert any("pattern with minLength/maxLength" in p for p in problems)


def test_a_grammar_failure_is_not_retried_a_plain_500_is(server):
    reqs = [Request.simple("schema too big [[grammar500]]", constraint=Constraint(choices=("yes", "no"))),
            Request.simple("flaky [[500x1]]")]
    bad, flaky = generate(_model(server), reqs, progress=False)
    assert server.attempts["schema too big [[grammar500]]"] == 1
    assert bad.method == "error" and not bad.valid and "xgrammar" in bad.error
    assert flaky.valid and server.attempts["flaky [[500x1]]"] == 2


def test_cache_key_knows_what_the_server_serves():
    """Same URL and name, other weights behind it (vLLM's /v1/models root) or another label: other
    keys, so no cached answer of one setup is served for another."""
    from lib.schema import fingerprint

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
        assert bare.fingerprint == fingerprint({"backend": "openai", "name": "stub-vlm", "base_url": s.url})


def test_a_reply_is_checked_against_the_whole_schema_not_only_what_the_server_enforced(server):
    """The options' maxLength stays out of what the server gets (xgrammar refuses it beside a
    pattern) and is checked here: an over-long option is invalid, kept raw."""
    from lib.af.engine import OPTION_MAX_LENGTH, options_schema
    from lib.models.api import response_format

    c = Constraint(json_schema=options_schema(1))
    assert "maxLength" not in response_format(Request.simple("q", constraint=c))["json_schema"]["schema"][
        "properties"]["options"]["items"]
    long = "a" * (OPTION_MAX_LENGTH + 1)
    ok, too_long = generate(_model(server), [
        Request.simple('[[reply:{"options": ["A fine option"]}]]', constraint=c),
        Request.simple(f'[[reply:{{"options": ["{long}"]}}]]', constraint=c)], progress=False)
    assert (ok.valid, ok.parsed) == (True, {"options": ["A fine option"]})
    assert (too_long.valid, too_long.method, too_long.parsed) == (False, "invalid", None) and long in too_long.text
