"""A persistent request cache and request log on SQLite.

SQLite in WAL mode with a busy timeout is safe for the many writers a run has
(Dask worker processes, each with many requests in flight). The cache key
covers everything that can change an answer, so a cached answer is never
re-requested and an interrupted shard resumes where it stopped.

It is a cache: a damaged file is moved aside (kept, for a look), a fresh one
is started and the run goes on (finished results live in the stage outputs).
Only a file perseval can tell is its own is ever moved: a SQLite file (by its
header) that is not another program's database. A folder, a file of anything
else or another SQLite database at the cache's path is refused (`foreign`,
which `perseval validate` asks too) and left exactly as it is.

An answer that cannot be written (a full disk, a cache locked past the busy
timeout) is not lost for the run: it is kept in memory, written with the next
answer that can be, and said in a warning with the count still unwritten.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import threading
import time
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from filelock import FileLock

from perseval.core.errors import ConfigError
from perseval.core.hashing import canonical_json, content_key
from perseval.llm.guard import alive

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
  key TEXT PRIMARY KEY, deployment TEXT NOT NULL, response TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
  run_id TEXT, deployment TEXT, role TEXT, key TEXT, status TEXT,
  prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL, ts REAL);
CREATE INDEX IF NOT EXISTS requests_run ON requests(run_id);
CREATE TABLE IF NOT EXISTS inflight (key TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, ts REAL NOT NULL);
"""


def request_key(identity: str, messages: list[dict[str, Any]], sampling: dict[str, Any], seed: int | None,
                repeat: int, extra: dict[str, Any] | None = None) -> str:
    """Deployment identity + messages + sampling + seed + repeat index (+ schema/tools)."""
    return content_key(identity, messages, sampling, seed, repeat, extra or {}, length=40)


log = logging.getLogger("perseval.cache")
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
OWN_TABLE = "responses"  # the table of _SCHEMA that makes a SQLite file a request cache
OPEN_TRIES, OPEN_WAIT_S = 4, 0.5  # opening a file other processes open too: 0.5 + 1 + 1.5 s of retries


def _is_sqlite(path: Path) -> bool:
    """A regular file that starts with SQLite's header: a database file perseval may have created."""
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _tables(path: Path) -> list[str] | None:
    """The tables of a SQLite file, read without a lock or a write (immutable: no -wal or -shm is made);
    None when they cannot be read (a damaged file)."""
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
        try:
            return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        finally:
            con.close()
    except sqlite3.Error:
        return None


def foreign(path: str | Path) -> str | None:
    """Why `path` is no request cache perseval may open, set aside or write (a folder, a device, a file that
    is not SQLite, another program's SQLite database, a folder path through a file); None when it is one, or
    when nothing is there yet (perseval creates it)."""
    path = Path(path)
    advice = "name a file of its own for the request cache (a new name: perseval creates it), or move this away"
    if path.is_dir():
        return (f"{path} is a directory, not a request cache file: the request cache is one SQLite file that "
                f"perseval creates and keeps answers in (e.g. {path / 'request-cache.sqlite'}); nothing was moved "
                "or written")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        return f"{parent} is a file, so no request cache can be created at {path}; {advice}"
    if not path.exists():
        return None
    if not path.is_file():
        return f"{path} is not a regular file (a device, a pipe or a socket), so it is no request cache; {advice}"
    if path.stat().st_size == 0:
        return None  # SQLite takes an empty file as an empty database: nothing in it to lose
    if not _is_sqlite(path):
        return (f"{path} is not a SQLite file, so it is no request cache perseval wrote (perseval never moves "
                f"or writes over a file it did not create); {advice}")
    tables = _tables(path)
    if tables and OWN_TABLE not in tables:
        return (f"{path} is another program's SQLite database (tables: {', '.join(sorted(tables)[:5])}), not a "
                f"request cache (table {OWN_TABLE!r}); {advice}")
    return None


# Files this process has already checked with `foreign`. The check reads the file outside SQLite (the header
# with open(), the tables through an immutable connection), and closing such a descriptor drops every POSIX lock
# this process holds on the file, SQLite's included: another process (a Dask worker, someone's sqlite3 reading the
# cache) then takes itself for the last connection, checkpoints and deletes the -wal and -shm under this one's
# open connections, whose every later open fails with "disk I/O error" (a healthy cache was set aside as damaged
# that way). Checked once, before this process holds a lock on it, the file is left to SQLite.
_CHECKED: set[Path] = set()
_CHECKED_LOCK = threading.Lock()


def _check_once(path: Path) -> None:
    key = path.resolve()
    with _CHECKED_LOCK:
        if key in _CHECKED:
            return
        problem = foreign(path)
        if problem:
            raise ConfigError(f"request cache: {problem}")
        _CHECKED.add(key)


def drop_claims(path: Path, pids: Iterable[int], timeout_s: float = 2.0) -> None:
    """Remove the in-flight claims these processes of this host hold in the cache at `path`: a run stopped at
    once (Ctrl-C) leaves none behind. A later run would take them over (their processes are gone), so a cache
    that cannot be written now is left as it is."""
    pids = list(pids)
    if not pids or not _is_sqlite(path):
        return
    try:
        with closing(sqlite3.connect(path, timeout=timeout_s, isolation_level=None)) as con:
            con.execute(f"DELETE FROM inflight WHERE host = ? AND pid IN ({', '.join('?' * len(pids))})",
                        (socket.gethostname(), *pids))
    except sqlite3.Error:
        pass


class RequestCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        _check_once(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._unsaved: dict[str, tuple[str, str, float]] = {}  # key -> (deployment, response, created)
        self._unsaved_lock = threading.Lock()
        failure = self._open()
        if failure is not None:
            # one process sets a damaged file aside, and only once: the others, waiting on the lock, then find
            # the fresh file and open it
            with FileLock(f"{self.path}.lock", timeout=120):
                failure = self._open(tries=1)
                if failure is not None:
                    self._set_aside(failure)
                    with self._conn() as con:
                        con.executescript(_SCHEMA)

    def _open(self, tries: int = OPEN_TRIES) -> sqlite3.DatabaseError | None:
        """Open the file and read its table; the error when every try failed. A try can fail while another of
        the run's processes opens the file at the same moment (a transient "disk I/O error" during its WAL
        recovery): setting the file aside then would throw away every process's answers, so it is retried."""
        failure = None
        for attempt in range(tries):
            try:
                with self._conn() as con:
                    con.executescript(_SCHEMA)
                    con.execute("SELECT COUNT(*) FROM responses LIMIT 1").fetchone()
                return None
            except sqlite3.DatabaseError as exc:
                failure = exc
                self._drop_connection()
                if attempt + 1 < tries:
                    time.sleep(OPEN_WAIT_S * (attempt + 1))
        return failure

    def _drop_connection(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    def _set_aside(self, exc: sqlite3.DatabaseError) -> None:
        """Move a damaged cache file (and its WAL files) aside, keeping them; the next connection starts fresh.
        Only a SQLite file is moved: anything else at the path is refused as it is (`foreign`)."""
        self._drop_connection()
        if not _is_sqlite(self.path):  # e.g. "unable to open database file": a folder that cannot be written
            raise ConfigError(f"request cache: {self.path} cannot be opened as a SQLite file ({exc}); nothing was "
                              "moved: name a file of its own for the request cache") from None
        aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{self.path}{suffix}")
            if src.is_file():
                src.replace(Path(f"{aside}{suffix}"))
        log.warning("request cache %s is damaged (%s): moved aside to %s, starting a fresh one", self.path, exc,
                    aside.name)

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            # in WAL mode NORMAL syncs at checkpoints, not at every commit: a crash of perseval loses nothing, a
            # power cut at most the last answers (sent again by the next run); FULL's sync per commit made the
            # cache the bottleneck of a run against a fast server
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA busy_timeout=60000")
            self._local.con = con
        yield con

    def get(self, key: str) -> dict[str, Any] | None:
        with self._unsaved_lock:
            kept = self._unsaved.get(key)
        if kept is not None:
            return json.loads(kept[1])
        with self._conn() as con:
            row = con.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, deployment: str, response: dict[str, Any]) -> bool:
        """Store an answer; False when it could not be written (it is kept, and written with the next answer
        that can be: a full disk that has room again loses nothing)."""
        with self._unsaved_lock:
            self._unsaved[key] = (deployment, canonical_json(response), time.time())
        return self.flush()

    def flush(self, final: bool = False) -> bool:
        """Write the answers not written yet; False while that fails, said in a warning with the count (at the
        1st, 2nd, 4th, 8th ... answer kept, and once more when `final`: the client is done with the cache)."""
        with self._unsaved_lock:
            rows = [(k, *v) for k, v in self._unsaved.items()]
        if not rows:
            return True
        try:
            with self._conn() as con:
                con.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)", rows)
        except sqlite3.Error as exc:
            n = len(rows)
            if final:
                log.warning("request cache %s: %d answer(s) received in this run could not be cached (%s): the "
                            "stage outputs keep them, but a re-run that needs them sends them again", self.path, n,
                            exc)
            elif n & (n - 1) == 0:
                log.warning("request cache %s: %d answer(s) received could not be cached so far (%s); kept in "
                            "memory and written as soon as the cache takes writes again", self.path, n, exc)
            return False
        with self._unsaved_lock:
            for k, *_ in rows:
                self._unsaved.pop(k, None)
        return True

    @property
    def unsaved(self) -> int:
        """Answers received and not written yet."""
        with self._unsaved_lock:
            return len(self._unsaved)

    def log_request(self, run_id: str, deployment: str, role: str, key: str, status: str,
                    prompt_tokens: int, completion_tokens: int, latency_s: float) -> None:
        try:
            with self._conn() as con:
                con.execute("INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (run_id, deployment, role, key, status, prompt_tokens, completion_tokens,
                             latency_s, time.time()))
        except sqlite3.Error as exc:  # the count of this run's requests is short by one; the answer is kept
            log.warning("request cache %s: a request sent could not be logged (%s): this run's request counts "
                        "miss it", self.path, exc)

    def settle(self, key: str, deployment: str, response: dict[str, Any] | None, log: tuple[Any, ...]) -> None:
        """A sent request is over, in one transaction: its answer stored (None: a failure, not cached), the
        request logged (`log`: log_request's fields after the key) and this process's claim on it dropped. One
        commit where put, log_request and unclaim took three; the answer lands before the claim goes, so another
        process waiting on the claim finds it. Where the write fails, each step is tried on its own as before."""
        with self._unsaved_lock:
            if response is not None:
                self._unsaved[key] = (deployment, canonical_json(response), time.time())
            rows = [(k, *v) for k, v in self._unsaved.items()]
        run_id, role, status, prompt_tokens, completion_tokens, latency_s = log
        try:
            with self._conn() as con:
                con.execute("BEGIN IMMEDIATE")
                try:
                    con.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)", rows)
                    con.execute("INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                (run_id, deployment, role, key, status, prompt_tokens, completion_tokens,
                                 latency_s, time.time()))
                    con.execute("DELETE FROM inflight WHERE key = ? AND host = ? AND pid = ?",
                                (key, socket.gethostname(), os.getpid()))
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
        except sqlite3.Error:
            self.flush()
            self.log_request(run_id, deployment, role, key, status, prompt_tokens, completion_tokens, latency_s)
            self.unclaim(key)
            return
        with self._unsaved_lock:
            for k, *_ in rows:
                self._unsaved.pop(k, None)

    def claim(self, key: str, stale_s: float) -> bool:
        """Take the sending of `key` for this process (single flight across the processes sharing the cache);
        False while another live process holds it. A claim of a process that is gone (same host, by pid) or,
        from another host, older than `stale_s` is taken over. A cache that cannot be written claims nothing
        and says True: the claim saves a duplicate request, it is never the reason one is not sent."""
        host, now = socket.gethostname(), time.time()
        try:
            with self._conn() as con:
                con.execute("BEGIN IMMEDIATE")
                try:
                    row = con.execute("SELECT host, pid, ts FROM inflight WHERE key = ?", (key,)).fetchone()
                    if row is not None and (alive(row[1]) if row[0] == host else now - row[2] < stale_s):
                        return row[0] == host and row[1] == os.getpid()
                    con.execute("INSERT OR REPLACE INTO inflight VALUES (?, ?, ?, ?)", (key, host, os.getpid(), now))
                finally:
                    con.execute("COMMIT")
        except sqlite3.Error:
            return True
        return True

    def unclaim(self, key: str) -> None:
        """The sending of `key` by this process is over (answered, failed or abandoned)."""
        try:
            with self._conn() as con:
                con.execute("DELETE FROM inflight WHERE key = ? AND host = ? AND pid = ?",
                            (key, socket.gethostname(), os.getpid()))
        except sqlite3.Error:  # a claim left behind is taken over once this process is gone
            pass

    def claimed(self, key: str, stale_s: float) -> bool:
        """Whether another live process is sending `key` now (False when the cache cannot be read: then this one
        sends it)."""
        try:
            with self._conn() as con:
                row = con.execute("SELECT host, pid, ts FROM inflight WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:
            return False
        if row is None:
            return False
        return alive(row[1]) if row[0] == socket.gethostname() else time.time() - row[2] < stale_s

    def distinct_keys(self, run_id: str) -> int:
        """The distinct requests (cache keys) sent during one run: equal to the requests sent when none was sent
        twice."""
        with self._conn() as con:
            return con.execute("SELECT COUNT(DISTINCT key) FROM requests WHERE run_id = ?", (run_id,)).fetchone()[0]

    def request_counts(self, run_id: str) -> dict[str, dict[str, int]]:
        """Requests actually sent during one run, by role and status (cache hits are not requests)."""
        with self._conn() as con:
            rows = con.execute("SELECT role, status, COUNT(*) FROM requests WHERE run_id = ? GROUP BY role, status",
                               (run_id,)).fetchall()
        out: dict[str, dict[str, int]] = {}
        for role, status, n in rows:
            out.setdefault(role, {})[status] = n
        return out

    def sent_messages(self, keys: list[str]) -> dict[str, list[dict[str, Any]] | None]:
        """Key -> the messages sent for it, as stored beside its answer (None: an answer stored before messages
        were kept); a key with no answer is absent."""
        out: dict[str, list[dict[str, Any]] | None] = {}
        with self._conn() as con:
            for i in range(0, len(keys), 500):
                part = keys[i:i + 500]
                rows = con.execute(f"SELECT key, response FROM responses WHERE key IN ({','.join('?' * len(part))})",
                                   part).fetchall()
                out |= {k: json.loads(r).get("messages") for k, r in rows}
        return out

    def __len__(self) -> int:
        with self._conn() as con:
            return con.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
