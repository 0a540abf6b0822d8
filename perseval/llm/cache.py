"""A persistent request cache and request log on SQLite.

SQLite in WAL mode with a busy timeout is safe for the many writers a run has
(Dask worker processes, each with many requests in flight). The cache key
covers everything that can change an answer, so a cached answer is never
re-requested and an interrupted shard resumes where it stopped.

It is a cache: a damaged file is moved aside (kept, for a look), a fresh one
is started and the run goes on (finished results live in the stage outputs).
"""
from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from perseval.core.hashing import canonical_json, content_key

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
  key TEXT PRIMARY KEY, deployment TEXT NOT NULL, response TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
  run_id TEXT, deployment TEXT, role TEXT, key TEXT, status TEXT,
  prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL, ts REAL);
CREATE INDEX IF NOT EXISTS requests_run ON requests(run_id);
"""


def request_key(identity: str, messages: list[dict[str, Any]], sampling: dict[str, Any], seed: int | None,
                repeat: int, extra: dict[str, Any] | None = None) -> str:
    """Deployment identity + messages + sampling + seed + repeat index (+ schema/tools)."""
    return content_key(identity, messages, sampling, seed, repeat, extra or {}, length=40)


log = logging.getLogger("perseval.cache")


class RequestCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        try:
            with self._conn() as con:
                con.executescript(_SCHEMA)
                con.execute("SELECT COUNT(*) FROM responses LIMIT 1").fetchone()
        except sqlite3.DatabaseError as exc:
            self._set_aside(exc)
            with self._conn() as con:
                con.executescript(_SCHEMA)

    def _set_aside(self, exc: sqlite3.DatabaseError) -> None:
        """Move a damaged cache file (and its WAL files) aside, keeping them; the next connection starts fresh."""
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None
        aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{self.path}{suffix}")
            if src.exists():
                src.replace(Path(f"{aside}{suffix}"))
        log.warning("request cache %s is damaged (%s): moved aside to %s, starting a fresh one", self.path, exc,
                    aside.name)

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA busy_timeout=60000")
            self._local.con = con
        yield con

    def get(self, key: str) -> dict[str, Any] | None:
        with self._conn() as con:
            row = con.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, deployment: str, response: dict[str, Any]) -> None:
        with self._conn() as con:
            con.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                        (key, deployment, canonical_json(response), time.time()))

    def log_request(self, run_id: str, deployment: str, role: str, key: str, status: str,
                    prompt_tokens: int, completion_tokens: int, latency_s: float) -> None:
        with self._conn() as con:
            con.execute("INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (run_id, deployment, role, key, status, prompt_tokens, completion_tokens,
                         latency_s, time.time()))

    def request_counts(self, run_id: str) -> dict[str, dict[str, int]]:
        """Requests actually sent during one run, by role and status (cache hits are not requests)."""
        with self._conn() as con:
            rows = con.execute("SELECT role, status, COUNT(*) FROM requests WHERE run_id = ? GROUP BY role, status",
                               (run_id,)).fetchall()
        out: dict[str, dict[str, int]] = {}
        for role, status, n in rows:
            out.setdefault(role, {})[status] = n
        return out

    def __len__(self) -> int:
        with self._conn() as con:
            return con.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
