"""Claims die with their process: three processes share one call store, the one holding the claims is
killed, and the other two take its claims over at once and make each of its calls once - not twice, and
not after the claims expire."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

from lib.core.schema import Response
from lib.models import Request, generate
from lib.models import store as call_store
from lib.models.backend import Model
from lib.models.store import CallStore, call_key, claim_owner, owner_alive

from ..support.openai_server import OpenAIStub

N = 40  # questions, asked by all three processes
KILLED_CONCURRENCY = (
    2  # calls the killed process has in flight at most: the only ones that may be made twice
)

# One evaluation through the shared store: argv store, server url, concurrency, batch size, a file made
# when it starts waiting for another's claims, a file it waits for before its first call. The key (by
# its environment variable, outside the model's fingerprint) tells the server which process asks.
ASK = textwrap.dedent(
    """
    import json, os, sys, time
    from lib.models import Request, generate, load_model
    from lib.models.store import CallStore

    model = load_model({"backend": "openai", "name": "stub", "base_url": sys.argv[2], "api_key_env": "VQALAB_KILL_KEY",
                        "concurrency": int(sys.argv[3]), "batch_size": int(sys.argv[4]), "max_retries": 0})
    reqs = [Request.simple(f"question {i}") for i in range(N_QUESTIONS)]
    store = CallStore(sys.argv[1])
    waiting = store.wait_for

    def wait_for(keys, **kw):
        open(sys.argv[5], "a").close()
        return waiting(keys, **kw)

    store.wait_for = wait_for
    calls = model.generate

    def generate_when_told(batch, on_result=None):
        while not os.path.exists(sys.argv[6]):
            time.sleep(0.02)
        return calls(batch, on_result)

    model.generate = generate_when_told
    out = generate(model, reqs, store=store, progress=False)
    print(json.dumps({"computed": out.n_computed, "texts": [r.text for r in out]}))
""".replace("N_QUESTIONS", str(N))
)


class WhoAsks(OpenAIStub):
    """The counting server, which also counts per key: which process made each call."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.by: Counter = Counter()

    async def _chat(self, request):
        last = (await request.json())["messages"][-1]["content"]
        text = (
            last
            if isinstance(last, str)
            else " ".join(p.get("text", "") for p in last if p.get("type") == "text")
        )
        self.by[(request.headers.get("Authorization", ""), text)] += 1
        return await super()._chat(request)


class Counting(Model):
    """A model that answers its prompt back and lists what it computed, after ``before(texts)``."""

    def __init__(self, before=None):
        super().__init__({"backend": "echo", "name": "echo"})
        self.computed, self.before = [], before

    def _load(self):
        pass

    def _generate(self, requests, on_result):
        texts = [r.messages[-1]["content"][-1]["text"] for r in requests]
        if self.before:
            self.before(texts)
        self.computed += texts
        out = [Response(text=t) for t in texts]
        for i, resp in enumerate(out):
            on_result(i, resp)
        return out


def _rows(db, sql: str) -> list:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _count(db, table: str) -> int:
    """Rows in a table of the store, 0 while the store is not made yet."""
    try:
        return _rows(db, f"SELECT COUNT(*) FROM {table}")[0][0] if db.exists() else 0
    except sqlite3.OperationalError:  # the tables are not created yet
        return 0


def _until(check, timeout_s: float, what: str) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout_s, f"{what} within {timeout_s} s"
        time.sleep(0.02)
    return time.monotonic() - start


def test_the_claim_holder_killed_mid_way_costs_only_its_calls_in_flight(tmp_path):
    """A claims all 40 calls and makes them slowly; B and C start and wait for A's results; A is
    SIGKILLed once it has stored a few. B and C take A's claims over within seconds (not CLAIM_TTL_S)
    and share its remaining calls: a call is made twice only if A had it in flight when killed (at
    most KILLED_CONCURRENCY of them), never three times, and B and C each get all 40 answers."""
    db, script = tmp_path / "calls.sqlite", tmp_path / "ask.py"
    script.write_text(ASK)
    with WhoAsks(delay_s=0.25) as server:

        def start(key, concurrency, batch):
            env = {**os.environ, "VQALAB_KILL_KEY": key}
            return subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    str(db),
                    server.url,
                    str(concurrency),
                    str(batch),
                    str(tmp_path / f"{key}.waits"),
                    str(go),
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

        go = tmp_path / "go"
        holder = start("sk-holder", KILLED_CONCURRENCY, 4)
        _until(lambda: _count(db, "claims") == N, 20, "A claims every call")
        survivors = [start(f"sk-survivor-{i}", 4, 8) for i in range(2)]
        _until(
            lambda: all((tmp_path / f"sk-survivor-{i}.waits").exists() for i in range(2)),
            20,
            "B and C wait",
        )
        go.touch()  # A makes its calls now that B and C wait for them
        _until(lambda: _count(db, "calls") >= 4, 20, "A stores its first results")
        assert holder.poll() is None and _count(db, "calls") < N - 8, (
            "A nearly finished before it was killed"
        )
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)

        def holders_claims():
            return [
                o
                for (o,) in _rows(db, "SELECT owner FROM claims")
                if o.split(":")[1] == str(holder.pid)
            ]

        _until(lambda: not holders_claims(), 5, "the killed process's claims are taken over")
        ran = [p.communicate(timeout=60) for p in survivors]
    for p, (out, err) in zip(survivors, ran):
        assert p.returncode == 0 and out.strip(), (
            f"a survivor failed (exit {p.returncode}): {err[-3000:]}"
        )
    outs = [json.loads(out.strip().splitlines()[-1]) for out, _ in ran]
    assert [o["texts"] for o in outs] == [[f"echo: question {i}" for i in range(N)]] * 2
    by_holder, by_survivors = (
        Counter(),
        Counter(),
    )  # calls per question, by A and by B and C together
    for (key, question), n in server.by.items():
        (by_holder if key == "Bearer sk-holder" else by_survivors)[question] += n
    twice = {q for q in by_survivors if q in by_holder}
    assert max(by_holder.values()) == 1 and max(by_survivors.values()) == 1, (
        "a process or the survivors repeat a call"
    )
    assert set(by_holder) | set(by_survivors) == {f"question {i}" for i in range(N)}
    assert len(twice) <= KILLED_CONCURRENCY, (
        f"calls the killed process had stored are made again: {sorted(twice)}"
    )
    assert sum(server.attempts.values()) == N + len(twice)
    assert sum(o["computed"] for o in outs) == len(by_survivors)
    assert _count(db, "claims") == 0 and _count(db, "calls") == N


def test_a_claim_whose_pid_now_runs_another_process_is_a_dead_owners(tmp_path):
    """The owner records its start time with its pid: a pid reused by a later process is not the owner."""
    me = claim_owner()
    host, pid, started, nonce = me.split(":")
    assert pid == str(os.getpid()) and owner_alive(me)
    reused = f"{host}:{pid}:{int(started) + 1}:{nonce}"
    assert not owner_alive(reused)
    store = CallStore(tmp_path / "calls.sqlite")
    assert store.claim(["k"], reused) == (["k"], [])
    assert store.claim(["k"], me) == (["k"], [])  # taken over at once


def test_a_killed_child_not_yet_reaped_is_dead():
    """A SIGKILLed process its parent has not waited for yet (a zombie) holds no claims."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = claim_owner(child.pid)
        assert owner_alive(owner)
        child.send_signal(signal.SIGKILL)
        _until(lambda: not owner_alive(owner), 5, "a killed child is seen dead before it is reaped")
    finally:
        child.kill()
        child.wait()


def test_claims_of_another_host_hold_while_renewed_and_lapse_when_not(tmp_path):
    """Another host's process cannot be looked up: its claims are a lease, kept while it renews them."""
    store = CallStore(tmp_path / "calls.sqlite")
    renewing, silent = "elsewhere:11:5:a", "elsewhere:12:5:b"
    store.claim(["a"], renewing)
    store.claim(["b"], silent)
    time.sleep(1.2)
    store.renew(renewing)
    assert store.claim(["a", "b"], claim_owner(), ttl_s=1.0) == (["b"], ["a"])


def test_a_process_renews_its_claims_while_it_makes_them(tmp_path, monkeypatch):
    """generate keeps its claims' lease fresh during a call longer than the renewal interval."""
    monkeypatch.setattr(call_store, "RENEW_S", 0.05)
    db = tmp_path / "calls.sqlite"
    seen = []

    def slow(texts):
        seen.append(_rows(db, "SELECT MAX(created) FROM claims")[0][0])
        time.sleep(0.5)
        seen.append(_rows(db, "SELECT MAX(created) FROM claims")[0][0])

    out = generate(
        Counting(before=slow), [Request.simple("q")], store=CallStore(db), progress=False
    )
    assert out[0].text == "q" and seen[1] > seen[0] + 0.2
    assert _count(db, "claims") == 0


def test_two_waiters_whose_calls_owner_dies_make_each_orphan_once(tmp_path):
    """Two runs wait on a live process's claims; it is killed: they claim its calls before making them,
    so each is made once (unclaimed, both made all of them)."""
    db = tmp_path / "calls.sqlite"
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    reqs = [Request.simple(f"q{i}") for i in range(8)]
    CallStore(db).claim([call_key(Counting().fingerprint, r) for r in reqs], claim_owner(owner.pid))
    models = [Counting() for _ in range(2)]
    waiters = [
        threading.Thread(
            target=generate, args=(m, reqs), kwargs={"store": CallStore(db), "progress": False}
        )
        for m in models
    ]
    for t in waiters:
        t.start()
    time.sleep(0.5)  # both wait on the owner's claims
    assert not any(m.computed for m in models)
    owner.kill()
    owner.wait()
    for t in waiters:
        t.join(30)
    assert sorted(x for m in models for x in m.computed) == [f"q{i}" for i in range(8)]
