"""A content-addressed cache of model calls in SQLite (WAL), which makes every run resumable.

The key of a call hashes the model fingerprint, the messages (images by content hash), the
generation settings and the constraint. Results are committed one by one as they complete, so a run
killed at any point loses at most the calls in flight; rerunning answers everything else from the
cache without loading the model. Raw text is stored with each response, so answers can be re-parsed
and re-scored (:meth:`CallStore.reparse`) without calling a model again.

Failed calls (``method == "error"``, e.g. an API that stayed down through its retries) are not
stored: a rerun tries them again. Unparseable answers *are* stored: the model did answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lib.core.answers import parse_response
from lib.core.paths import cache_dir
from lib.core.schema import ERROR, Constraint, Request, Response, is_constrained

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_model ON calls(model);
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created REAL NOT NULL  -- when claimed or last renewed: the claim's lease
);
"""
CLAIM_TTL_S = (
    120.0  # a claim not renewed for this long is a dead process's: another may take the call over
)
RENEW_S = 20.0  # how often a process renews its claims while it makes them (see CallStore.holding)


def _pid_namespace() -> str:
    """This process's pid namespace (two containers may share a hostname, never their pids)."""
    try:
        return "".join(c for c in os.readlink("/proc/self/ns/pid") if c.isdigit())
    except OSError:
        return ""


_HOST = "/".join(x for x in (socket.gethostname(), _pid_namespace()) if x)


def process_started(pid: int) -> str | None:
    """When process ``pid`` started (``/proc/<pid>/stat`` field 22), so that a pid reused by a later
    process is not taken for it; ``None`` if it is gone or killed and not yet reaped (a zombie);
    ``""`` where it cannot be read (no ``/proc``: the pid alone identifies the owner)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:  # gone, or another user's hidden by /proc's hidepid: asked the kernel
        return "" if _pid_exists(pid) else None
    except OSError:
        return ""
    fields = stat.rpartition(")")[2].split()  # the command name, in parentheses, may hold spaces
    return None if fields[0] in ("Z", "X") else fields[19]


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_owner(pid: int | None = None) -> str:
    """Who claims calls: host, process id, the process's start time and a nonce (one per
    :func:`lib.models.generate` call), so that another process on this host can tell when it died."""
    pid = os.getpid() if pid is None else pid
    return f"{_HOST}:{pid}:{process_started(pid) or ''}:{uuid.uuid4().hex[:8]}"


def owner_alive(owner: str) -> bool:
    """Is the claiming process still running? Known on this host (its pid and start time; a zombie is
    dead); elsewhere, assumed while it renews its claims (they lapse after :data:`CLAIM_TTL_S`)."""
    host, _, rest = owner.partition(":")
    parts = rest.split(":")
    if host not in (_HOST, socket.gethostname()) or not parts[0].isdigit():
        return True
    started = process_started(int(parts[0]))
    if started is None:
        return False
    recorded = (
        parts[1] if len(parts) == 3 else ""
    )  # host:pid:started:nonce (before start times: host:pid:nonce)
    return not (recorded and started and recorded != started)


def _looked_up(alive: dict[str, bool], owner: str) -> bool:
    """:func:`owner_alive`, asked once per owner in ``alive``."""
    if owner not in alive:
        alive[owner] = owner_alive(owner)
    return alive[owner]


def call_key(model_fingerprint: str, request: Request) -> str:
    payload = json.dumps(
        {"model": model_fingerprint, **request.key_payload()}, sort_keys=True, default=str
    )
    return hashlib.sha256(payload.encode()).hexdigest()


class CallStore:
    """SQLite-backed cache of model calls; safe to share between threads of one process and
    between processes (WAL lets readers run beside one writer)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, check_same_thread=False, timeout=60, isolation_level=None
        )
        self._wal()
        self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable against process kills
        self._db.executescript(_SCHEMA)

    def _wal(self, timeout_s: float = 60.0) -> None:
        """Switch the file to WAL. Two processes opening a fresh store at once can both try, and
        SQLite answers the loser "database is locked" at once, without its busy timeout: retried
        until ``timeout_s`` (a twin evaluation failed on it in CI)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def claim(
        self, keys: list[str], owner: str, ttl_s: float = CLAIM_TTL_S
    ) -> tuple[list[str], list[str]]:
        """Claim uncached calls before making them, so that two processes sharing this store make
        each call once: returns ``(mine, theirs)``; ``theirs`` are claimed by another live owner,
        whose results :meth:`wait_for` collects. A dead owner's claims (a process on this host that
        has exited, or a lease not renewed for ``ttl_s``) are taken over at once.
        A call stored since the caller last looked (another process made it and released its claim
        in between) is ``theirs`` too: checked under the same write lock as the claims, so it is never
        made twice."""
        mine, theirs, alive = [], [], {}
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM claims WHERE created < ?", (now - ttl_s,))
                for k in keys:
                    if self._db.execute("SELECT 1 FROM calls WHERE key = ?", (k,)).fetchone():
                        theirs.append(k)  # made and released since the caller's get_many
                        continue
                    cur = self._db.execute(
                        "INSERT OR IGNORE INTO claims VALUES (?, ?, ?)", (k, owner, now)
                    )
                    if cur.rowcount:
                        mine.append(k)
                    else:
                        row = self._db.execute(
                            "SELECT owner FROM claims WHERE key = ?", (k,)
                        ).fetchone()
                        if (
                            row and row[0] != owner and not _looked_up(alive, row[0])
                        ):  # a killed process's claim
                            self._db.execute(
                                "UPDATE claims SET owner = ?, created = ? WHERE key = ?",
                                (owner, now, k),
                            )
                            row = (owner,)
                        (mine if row and row[0] == owner else theirs).append(k)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return mine, theirs

    def release(self, keys: list[str], owner: str) -> None:
        """Drop this owner's claims (after their results are stored, or when giving up)."""
        with self._lock:
            self._db.executemany(
                "DELETE FROM claims WHERE key = ? AND owner = ?", [(k, owner) for k in keys]
            )

    def renew(self, owner: str) -> None:
        """Renew this owner's claims' lease, which another host's process cannot otherwise tell from a dead one's."""
        with self._lock:
            self._db.execute("UPDATE claims SET created = ? WHERE owner = ?", (time.time(), owner))

    @contextmanager
    def holding(self, owner: str) -> Iterator[None]:
        """Renew ``owner``'s claims every :data:`RENEW_S` while the block runs (a thread beside the calls)."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(RENEW_S):
                # the store busy past its timeout: renewed at the next beat
                with contextlib.suppress(sqlite3.Error):
                    self.renew(owner)

        thread = threading.Thread(target=beat, name="claims-lease", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _claimed(self, keys: list[str], ttl_s: float = CLAIM_TTL_S) -> set[str]:
        """Those of ``keys`` claimed by a live owner (each owner looked up once)."""
        now, rows = time.time(), []
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                rows += self._db.execute(
                    f"SELECT key, owner FROM claims WHERE created >= ? AND key IN ({','.join('?' * len(chunk))})",
                    [now - ttl_s, *chunk],
                ).fetchall()
        alive: dict[str, bool] = {}
        return {k for k, o in rows if _looked_up(alive, o)}

    def wait_for(
        self, keys: list[str], poll_s: float = 0.2
    ) -> tuple[dict[str, Response], list[str]]:
        """Results of calls others claimed, as they arrive: ``(found, orphaned)``. A call whose claim
        went away without a stored result (an error, a killed process) is orphaned, returned as soon as
        one is (the keys neither found nor orphaned are still awaited): the caller claims it again
        (:meth:`claim`) before making it, since other waiters find it orphaned too."""
        found: dict[str, Response] = {}
        waiting = list(dict.fromkeys(keys))
        while waiting:
            found.update(self.get_many(waiting))
            waiting = [k for k in waiting if k not in found]
            if not waiting:
                break
            claimed = self._claimed(waiting)
            gone = [k for k in waiting if k not in claimed]
            if gone:
                found.update(self.get_many(gone))  # stored just before its claim was released
                return found, [k for k in gone if k not in found]
            time.sleep(poll_s)
        return found, []

    @classmethod
    def default(cls) -> CallStore:
        """The project-wide store at ``outputs/cache/calls.sqlite``."""
        return cls(cache_dir() / "calls.sqlite")

    def get_many(self, keys: list[str]) -> dict[str, Response]:
        found: dict[str, Response] = {}
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), 500):  # SQLite caps bound parameters per statement
            chunk = unique[i : i + 500]
            with self._lock:
                rows = self._db.execute(
                    f"SELECT key, response FROM calls WHERE key IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
            found.update({k: Response.from_dict(json.loads(v), cached=True) for k, v in rows})
        return found

    def put(self, key: str, model_fingerprint: str, request: Request, response: Response) -> None:
        """Commit one result now (errors are skipped so that a rerun retries them)."""
        if response.method == ERROR:
            return
        row = (
            key,
            model_fingerprint,
            json.dumps(request.key_payload(), default=str),
            json.dumps(response.to_dict(), default=str),
            time.time(),
        )
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?)", row)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def records(self, model_fingerprint: str | None = None) -> Iterator[tuple[str, dict, Response]]:
        """Every stored call as ``(key, request payload, response)``, optionally for one model."""
        sql, args = "SELECT key, request, response FROM calls", ()
        if model_fingerprint:
            sql, args = sql + " WHERE model = ?", (model_fingerprint,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created", args).fetchall()
        for key, req, resp in rows:
            yield key, json.loads(req), Response.from_dict(json.loads(resp), cached=True)

    def reparse(self, keys: list[str], constraint: Constraint | None) -> list[Response | None]:
        """Re-read stored raw text under ``constraint`` (e.g. an improved parser) without any model.

        Constrained-decoding answers keep their method; free text is parsed afresh. Missing keys
        give ``None``.
        """
        stored = self.get_many(keys)
        out: list[Response | None] = []
        for k in keys:
            r = stored.get(k)
            if r is not None and not is_constrained(r.method):
                r.parsed, r.method, r.valid = parse_response(r.text, constraint)
            out.append(r)
        return out

    def close(self) -> None:
        with self._lock:
            self._db.close()
