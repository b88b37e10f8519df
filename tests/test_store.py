"""The call cache: hits skip the model, results survive a SIGKILL, raw outputs can be re-parsed."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from lib.core.schema import Response
from lib.models import Constraint, Request, generate
from lib.models.backend import Model
from lib.models.store import CallStore, call_key


class Echo(Model):
    """A model that answers its prompt back and counts what it computed."""

    batch_size = 4

    def __init__(self, spec=None, fail_on=()):
        super().__init__(spec or {"backend": "echo", "name": "echo"})
        self.computed, self.fail_on = [], fail_on

    def _load(self):
        pass

    def _generate(self, requests, on_result):
        out = []
        for i, r in enumerate(requests):
            text = r.messages[-1]["content"][-1]["text"]
            self.computed.append(text)
            resp = (
                Response(text="ERR", method="error", valid=False)
                if text in self.fail_on
                else Response(text=text)
            )
            out.append(resp)
            on_result(i, resp)
        return out


def test_cached_calls_do_not_reach_the_model(tmp_path):
    store = CallStore(tmp_path / "calls.sqlite")
    reqs = [Request.simple(f"q{i}") for i in range(10)]
    first = generate(Echo(), reqs, store=store, progress=False)
    model = Echo()
    again = generate(model, reqs + [Request.simple("new")], store=store, progress=False)
    assert model.computed == ["new"]
    assert again.n_cached == 10 and again.n_computed == 1
    assert [r.text for r in again[:10]] == [r.text for r in first] and all(
        r.cached for r in again[:10]
    )


def test_key_covers_model_settings_constraint_and_image_content(tmp_path, images):
    r = Request.simple("q", [images[0]])
    base = call_key("m", r)
    assert call_key("other-model", r) != base
    assert call_key("m", Request.simple("q", [images[0]], max_new_tokens=5)) != base
    assert (
        call_key("m", Request.simple("q", [images[0]], constraint=Constraint(choices=("a", "b"))))
        != base
    )
    assert call_key("m", Request.simple("q", [images[1]])) != base
    copy = tmp_path / "renamed.png"
    copy.write_bytes(images[0].read_bytes())
    assert (
        call_key("m", Request.simple("q", [copy])) == base
    )  # content, not the path, identifies an image


def test_failed_calls_are_not_cached_so_a_rerun_retries_them(tmp_path):
    store = CallStore(tmp_path / "calls.sqlite")
    reqs = [Request.simple("ok"), Request.simple("down")]
    generate(Echo(fail_on={"down"}), reqs, store=store, progress=False)
    model = Echo()
    generate(model, reqs, store=store, progress=False)
    assert model.computed == ["down"]


def test_identical_requests_in_one_run_are_computed_once(tmp_path):
    model = Echo()
    out = generate(
        model, [Request.simple("same")] * 5, store=CallStore(tmp_path / "c.sqlite"), progress=False
    )
    assert model.computed == ["same"] and len(out) == 5


def test_stored_raw_output_is_reparsed_without_a_model(tmp_path):
    store = CallStore(tmp_path / "calls.sqlite")
    reqs = [Request.simple("The answer is B."), Request.simple("no idea")]
    generate(Echo(), reqs, store=store, progress=False)
    keys = [call_key(Echo().fingerprint, r) for r in reqs]
    again = store.reparse(keys, Constraint(choices=("A", "B", "C")))
    assert [(r.parsed, r.method, r.valid) for r in again] == [
        ("B", "parse:contains", True),
        (None, "invalid", False),
    ]


KILL_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from lib.models import Request, generate, load_model
    from lib.models.store import CallStore

    model = load_model({"backend": "tiny", "name": "llava"})
    inner = model._generate
    def slow(batch, on_result):  # log each batch before computing it; slow enough to be killed mid-run
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps([r.messages[-1]["content"][-1]["text"] for r in batch]) + "\\n")
        time.sleep(0.15)
        return inner(batch, on_result)
    model._generate = slow
    reqs = [Request.simple(f"question {i}", [sys.argv[3]], max_new_tokens=3) for i in range(200)]
    out = generate(model, reqs, store=CallStore(sys.argv[1]), batch_size=10, progress=False)
    print(json.dumps({"n": len(out), "cached": out.n_cached, "computed": out.n_computed}))
""")


def test_sigkill_halfway_then_rerun_loses_at_most_the_batch_in_flight(tmp_path, images):
    db, log = tmp_path / "calls.sqlite", tmp_path / "batches.jsonl"
    script = tmp_path / "job.py"
    script.write_text(KILL_SCRIPT)
    cmd = [sys.executable, str(script), str(db), str(log), str(images[0])]
    proc = subprocess.Popen(
        cmd, env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 300
    while time.time() < deadline:
        if db.exists() and len(CallStore(db)) >= 100:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stored = len(CallStore(db))
    started = sum(len(json.loads(line)) for line in log.read_text().splitlines())
    assert 100 <= stored < 200, "the kill did not land halfway"
    assert started - stored <= 10, "more than the in-flight batch was lost"

    rerun = subprocess.run(
        cmd, env=os.environ.copy(), capture_output=True, text=True, timeout=300, check=True
    )
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert summary == {"n": 200, "cached": stored, "computed": 200 - stored}
    store = CallStore(db)
    keys = [k for k, _, _ in store.records()]
    assert len(keys) == len(set(keys)) == 200


TWIN_SCRIPT = textwrap.dedent("""
    import json, sys
    from lib.models import Request, generate, load_model
    from lib.models.store import CallStore

    model = load_model({"backend": "openai", "name": "stub", "base_url": sys.argv[2], "api_key_env": "VQALAB_TWIN_KEY",
                        "concurrency": 4, "batch_size": 8})
    reqs = [Request.simple(f"question {i}") for i in range(int(sys.argv[3]))]
    out = generate(model, reqs, store=CallStore(sys.argv[1]), progress=False)
    print(json.dumps({"n": len(out), "computed": out.n_computed, "texts": [r.text for r in out]}))
""")


def test_two_evaluations_sharing_a_store_make_each_call_once(tmp_path):
    """Two processes ask the same 60 questions through one call cache at the same time: a counting
    server on 127.0.0.1 sees each question once, and both get every answer."""
    from .support.openai_server import OpenAIStub

    script = tmp_path / "twin.py"
    script.write_text(TWIN_SCRIPT)
    with OpenAIStub(delay_s=0.05) as server:
        env = {**os.environ, "VQALAB_TWIN_KEY": "sk-twin"}
        cmd = [sys.executable, str(script), str(tmp_path / "calls.sqlite"), server.url, "60"]
        procs = [
            subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        ran = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, ran):
        assert p.returncode == 0 and out.strip(), (
            f"a twin failed (exit {p.returncode}): {err[-3000:]}"
        )
    outs = [json.loads(out.strip().splitlines()[-1]) for out, _ in ran]
    assert sum(server.attempts.values()) == 60 and max(server.attempts.values()) == 1
    assert [o["n"] for o in outs] == [60, 60] and sum(o["computed"] for o in outs) == 60
    assert outs[0]["texts"] == outs[1]["texts"] == [f"echo: question {i}" for i in range(60)]


def test_a_call_made_and_released_after_a_runs_first_look_is_not_made_again(tmp_path):
    """The interleaving the twin test met under load: this run looks in the store, then the other
    process makes a call, stores it and releases its claim, then this run claims. The claim sees
    the stored call and waits for it instead of making it a second time."""
    store = CallStore(tmp_path / "calls.sqlite")
    reqs = [Request.simple(f"q{i}") for i in range(6)]
    twin, looked = CallStore(tmp_path / "calls.sqlite"), []

    def stale_first_look(keys, real=store.get_many):
        if not looked:  # the other process finishes between this look and the claim
            looked.append(len(real(keys)))
            generate(Echo(), reqs[:4], store=twin, progress=False)
            return {}
        return real(keys)

    store.get_many = stale_first_look
    model = Echo()
    out = generate(model, reqs, store=store, progress=False)
    assert looked == [0] and model.computed == ["q4", "q5"]
    assert out.n_computed == 2 and [r.text for r in out] == [f"q{i}" for i in range(6)]


def test_a_killed_processs_claims_do_not_block_the_next_run(tmp_path):
    store = CallStore(tmp_path / "calls.sqlite")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    import socket

    ghost = f"{socket.gethostname()}:{dead.stdout.strip()}:abc"  # a process that has exited
    assert store.claim(["k1", "k2"], ghost) == (["k1", "k2"], [])
    mine, theirs = store.claim(["k1", "k2"], "me-elsewhere:1:x")
    assert mine == ["k1", "k2"] and theirs == []  # taken over, not waited for


def test_a_store_opened_while_another_process_switches_it_to_wal_waits(tmp_path, monkeypatch):
    """SQLite answers "database is locked" at once, without its busy timeout, to a second process
    switching a fresh file to WAL: the store retries instead of failing the evaluation."""
    import sqlite3

    from lib.models import store as call_store

    real_connect, refused = sqlite3.connect, []

    class Busy:
        def __init__(self, db):
            self._db = db

        def execute(self, sql, *args):
            if sql.startswith("PRAGMA journal_mode") and len(refused) < 3:
                refused.append(sql)
                raise sqlite3.OperationalError("database is locked")
            return self._db.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self._db, name)

    monkeypatch.setattr(call_store.sqlite3, "connect", lambda *a, **k: Busy(real_connect(*a, **k)))
    store = call_store.CallStore(tmp_path / "calls.sqlite")
    assert len(refused) == 3
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
