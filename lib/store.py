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

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from lib.answers import parse_response
from lib.schema import ERROR, Constraint, Request, Response, is_constrained
from lib.paths import cache_dir

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_model ON calls(model);
"""


def call_key(model_fingerprint: str, request: Request) -> str:
    payload = json.dumps({"model": model_fingerprint, **request.key_payload()}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


class CallStore:
    """SQLite-backed cache of model calls; safe to share between threads of one process and
    between processes (WAL lets readers run beside one writer)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable against process kills
        self._db.executescript(_SCHEMA)

    @classmethod
    def default(cls) -> "CallStore":
        """The project-wide store at ``outputs/cache/calls.sqlite``."""
        return cls(cache_dir() / "calls.sqlite")

    def get_many(self, keys: list[str]) -> dict[str, Response]:
        found: dict[str, Response] = {}
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), 500):  # SQLite caps bound parameters per statement
            chunk = unique[i:i + 500]
            with self._lock:
                rows = self._db.execute(
                    f"SELECT key, response FROM calls WHERE key IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
            found.update({k: Response.from_dict(json.loads(v), cached=True) for k, v in rows})
        return found

    def put(self, key: str, model_fingerprint: str, request: Request, response: Response) -> None:
        """Commit one result now (errors are skipped so that a rerun retries them)."""
        if response.method == ERROR:
            return
        row = (key, model_fingerprint, json.dumps(request.key_payload(), default=str),
               json.dumps(response.to_dict(), default=str), time.time())
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
