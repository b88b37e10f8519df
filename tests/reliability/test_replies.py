"""Hostile and broken replies: whatever one reply holds - JSON nested 100,000 deep, content that is
not text, megabytes, a body dripped past ``timeout_s``, a key its closed schema forbids - fails that
item only, kept raw (cut when huge) with a reason, and never the batch; good replies read as before."""

import time

import pytest

from lib.core.answers import MAX_REPLY_CHARS, parse_choice, parse_json, parse_response
from lib.core.schema import Item, Response
from lib.eval.ask import predict
from lib.io import dataset_info, save_dataset
from lib.models import Constraint, Request, generate, load_model
from lib.models.store import CallStore
from lib.stages.evaluate import EvalConfig
from lib.tasks.registry import get_task
from tests.support.stage06 import rescored

from ..support.hostile_server import HostileStub
from ..support.openai_server import OpenAIStub

DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000  # 600,001 characters
DEEP_SHORT = "[" * 20_000 + "]" * 20_000  # as deep as the parser refuses, under the reply cap
CHOICE = Constraint(choices=("A", "B"))


def _model(server, **kw):
    return load_model(
        {
            "backend": "openai",
            "name": "stub-vlm",
            "base_url": server.url,
            "api_key_env": "VQALAB_TEST_KEY",
            "concurrency": 4,
            "max_retries": 0,
            "timeout_s": 3,
            **kw,
        }
    )


def _item(i: int) -> Item:
    return Item(
        id=f"q{i}",
        task="mcq",
        question=f"Which animal is in picture {i}?",
        options=["cat", "dog"],
        answer=[0],
    )


def _prompt_text(item: Item, root) -> str:
    content = (
        get_task("mcq")
        .request(item, root, max_new_tokens=EvalConfig.max_new_tokens)
        .messages[-1]["content"]
    )
    return " ".join(p["text"] for p in content if p.get("type") == "text")


def test_json_nested_too_deep_is_an_invalid_answer_of_its_item_not_an_abort(monkeypatch):
    monkeypatch.delenv("VQALAB_TEST_KEY", raising=False)
    with HostileStub(
        contents={"deep choice": DEEP, "deep json": DEEP_SHORT, "deep list": DEEP_SHORT}
    ) as server:
        deep, deep_json, deep_list, good = generate(
            _model(server),
            [
                Request.simple("deep choice", constraint=CHOICE),
                Request.simple("deep json", constraint=Constraint(json_schema={"type": "array"})),
                Request.simple("deep list", constraint=CHOICE),
                Request.simple("good", constraint=CHOICE),
            ],
            progress=False,
        )
    assert (deep.parsed, deep.method, deep.valid, deep.error) == (None, "invalid", False, None)
    assert (
        deep.text == DEEP[:MAX_REPLY_CHARS] and deep.finish_reason == "length"
    )  # cut, and counted as cut
    assert "600,001 characters" in deep.problem and "nested too deep" in deep.problem
    for r in (deep_json, deep_list):
        assert (r.parsed, r.method, r.valid, r.text, r.finish_reason) == (
            None,
            "invalid",
            False,
            DEEP_SHORT,
            "stop",
        )
        assert "nested too deep" in r.problem
    assert (good.parsed, good.method, good.valid, good.problem) == ("A", "json_schema", True, None)
    # the readers themselves: an unreadable answer, never a RecursionError
    assert parse_json(DEEP) == (None, "invalid")
    assert parse_choice(DEEP, ("A", "B")) == (None, "invalid")
    assert parse_response(DEEP_SHORT, Constraint(json_schema={"type": "array"})) == (
        None,
        "invalid",
        False,
    )


def test_replies_that_are_not_text_or_too_deep_fail_their_items_and_the_evaluation_goes_on(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("VQALAB_TEST_KEY", raising=False)
    items = [_item(i) for i in range(6)]
    texts = [_prompt_text(it, tmp_path) for it in items]
    hostile = {
        texts[1]: ["A"],
        texts[2]: 1,
        texts[3]: {"answer": "A"},
        texts[4]: DEEP,
        texts[5]: "I think " * 500_000,
    }
    cfg = EvalConfig(styles=["zero_shot"])
    store = CallStore(tmp_path / "calls.sqlite")
    with HostileStub(contents=hostile) as server:
        model = _model(server)
        preds = predict(
            "stub",
            model,
            items,
            tmp_path,
            "zero_shot",
            cfg,
            store=store,
            progress=False,
            dataset="d",
        )
    good, as_list, as_int, as_object, deep, huge = preds
    assert (good.parsed, good.method, good.valid, good.raw) == (
        "A",
        "json_schema",
        True,
        '{"answer": "A"}',
    )
    for p, raw, kind in (
        (as_list, '["A"]', "list"),
        (as_int, "1", "int"),
        (as_object, '{"answer": "A"}', "dict"),
    ):
        assert (p.parsed, p.valid, p.method, p.raw) == (None, False, "error", raw)  # kept, as JSON
        assert f"content is a {kind}, not text" in p.meta["error"]
    assert (deep.parsed, deep.valid, deep.method, deep.truncated) == (None, False, "invalid", True)
    assert (huge.parsed, huge.valid, huge.method, huge.truncated) == (None, False, "invalid", True)
    assert len(huge.raw) == MAX_REPLY_CHARS
    # the call cache keeps the cut reply and why, not 4 MB
    cached = store.get_many([huge.call_key])[huge.call_key]
    assert len(cached.text) == MAX_REPLY_CHARS and "4,000,000 characters" in cached.problem
    # rescoring re-reads the raw text: the verdicts stand, nothing raises
    save_dataset(tmp_path, items, dataset_info("d"))
    again, _ = rescored(
        EvalConfig(datasets={"d": str(tmp_path)}, styles=["zero_shot"]), preds, tmp_path / "06"
    )
    assert [p.valid for p in again] == [True, False, False, False, False, False]
    assert [p.correct for p in again] == [True, False, False, False, False, False]


def test_a_task_reads_a_reply_that_is_not_text_as_invalid():
    """Responses cached before the backend kept such replies as JSON hold the list or object itself."""
    item, open_item = (
        _item(0),
        Item(id="o", task="vqa.open", question="What is it?", answer=["a cat"]),
    )
    for text in (["A"], 1, {"answer": "A"}, None):
        assert get_task("mcq").read_response(item, Response(text=text)) == (None, "invalid", False)
        assert get_task("vqa.open").read_response(open_item, Response(text=text)) == (
            None,
            "invalid",
            False,
        )
    assert get_task("mcq").read_response(
        item, Response(text="A", parsed=["A"], method="json_schema")
    ) == (None, "invalid", False)  # a constrained value that is no text
    # a failed call has no answer, whatever text it kept (the AF discriminator reads every response)
    failed = Response(
        text='["A"]', method="error", valid=False, error="the reply's content is a list, not text"
    )
    assert get_task("mcq").read_response(item, failed) == (None, "error", False)


def test_a_reply_past_the_cap_is_cut_and_counted_as_truncated(tmp_path, monkeypatch):
    monkeypatch.delenv("VQALAB_TEST_KEY", raising=False)
    big = "word " * 1_000_000  # 5 MB of text
    with HostileStub(contents={"talk": big}) as server:
        model = _model(server)
        store = CallStore(tmp_path / "calls.sqlite")
        (r,) = generate(model, [Request.simple("talk")], store=store, progress=False)
        (again,) = generate(model, [Request.simple("talk")], store=store, progress=False)
    assert r.text == big[:MAX_REPLY_CHARS] and (r.method, r.valid, r.finish_reason) == (
        "free",
        True,
        "length",
    )
    assert "5,000,000 characters" in r.problem and "'stop'" in r.problem
    assert again.cached and again.text == r.text and again.problem == r.problem


def test_a_cut_reply_keeps_no_part_of_the_key(monkeypatch):
    monkeypatch.setenv("VQALAB_TEST_KEY", "sk-secret-value-123")
    echoed = (
        "x" * (MAX_REPLY_CHARS - 6) + "sk-secret-value-123" + "x" * 100
    )  # the key across the cut
    with HostileStub(contents={"echo": echoed, "echo list": [echoed]}) as server:
        as_text, as_list = generate(
            _model(server), [Request.simple("echo"), Request.simple("echo list")], progress=False
        )
    for r in (as_text, as_list):
        assert len(r.text) == MAX_REPLY_CHARS and "sk-" not in r.text and "<red" in r.text[-10:]


def test_timeout_s_bounds_a_reply_dripped_slower_than_any_read_timeout(monkeypatch):
    monkeypatch.delenv("VQALAB_TEST_KEY", raising=False)
    with HostileStub(drip_s={"slow": 8.0, "brisk": 0.5}, drip_every_s=0.1) as server:
        start = time.perf_counter()
        slow, brisk, good = generate(
            _model(server, timeout_s=1, max_retries=1),
            [
                Request.simple("slow", constraint=CHOICE),
                Request.simple("brisk"),
                Request.simple("good"),
            ],
            progress=False,
        )
        took = time.perf_counter() - start
    assert (slow.method, slow.valid, slow.parsed) == (
        "error",
        False,
        None,
    ) and "Timeout" in slow.error
    assert server.attempts["slow"] == 2  # retried like any timeout, then an error of that item
    assert took < 5  # two attempts of 1 s and a backoff, not two of 8 s
    assert (brisk.text, brisk.valid) == (
        "echo: brisk",
        True,
    )  # a slow body within timeout_s is read whole
    assert (good.text, good.valid) == ("echo: good", True)


@pytest.mark.parametrize(
    "reply",
    [
        '{"answer": "A", "extra": 1}',
        'Sure: {"answer": "A", "why": "it is"}',
        '{"answer": "C"}',
        '["A"] ',
    ],
)  # a space: the stub's marker ends at ]]
def test_a_closed_schema_is_held_closed(reply, monkeypatch):
    monkeypatch.delenv("VQALAB_TEST_KEY", raising=False)
    schema = {
        "type": "object",
        "properties": {"rating": {"type": "integer"}},
        "required": ["rating"],
        "additionalProperties": False,
    }
    with OpenAIStub() as server:
        as_choice, as_json = generate(
            _model(server),
            [
                Request.simple(f"[[reply:{reply}]]", constraint=CHOICE),
                Request.simple(
                    '[[reply:{"rating": 2, "extra": 1}]]', constraint=Constraint(json_schema=schema)
                ),
            ],
            progress=False,
        )
    assert (as_choice.parsed, as_choice.method, as_choice.valid, as_choice.text) == (
        None,
        "invalid",
        False,
        reply,
    )
    assert "does not fit the schema" in as_choice.problem
    assert (as_json.parsed, as_json.method, as_json.valid) == (None, "invalid", False)
    assert "Additional properties are not allowed" in as_json.problem
    # re-read from the raw text (a rescore): still no answer
    assert get_task("mcq").read_response(_item(0), Response(text=reply)) == (None, "invalid", False)
    assert parse_choice(reply, ("A", "B")) == (None, "invalid")


def test_good_replies_read_as_before(monkeypatch):
    monkeypatch.delenv("VQALAB_TEST_KEY", raising=False)
    with OpenAIStub() as server:
        wrapped, bare, free = generate(
            _model(server),
            [
                Request.simple("pick", constraint=CHOICE),
                Request.simple("[[reply:B]]", constraint=CHOICE),
                Request.simple("plain"),
            ],
            progress=False,
        )
    assert (wrapped.parsed, wrapped.method, wrapped.valid, wrapped.text) == (
        "A",
        "json_schema",
        True,
        '{"answer": "A"}',
    )
    assert (bare.parsed, bare.method, bare.valid) == ("B", "parse:exact", True)
    assert (free.text, free.method, free.valid, free.finish_reason) == (
        "echo: plain",
        "free",
        True,
        "stop",
    )
    for r in (wrapped, bare, free):
        assert r.problem is None and "problem" not in r.to_dict()  # the cached record as it was
    # the closed wrapper read from free text, as before
    assert parse_choice('{"answer": "A"}', ("A", "B")) == ("A", "parse:contains")
    assert get_task("mcq").read_response(_item(0), Response(text='{"answer": "B"}')) == (
        "B",
        "parse:contains",
        True,
    )
