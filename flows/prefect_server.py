"""A local Prefect server for runs that have none configured.

Without an API every Prefect process (and each Dask worker) starts its own
temporary server, about 15 s each; one shared server on 127.0.0.1 avoids that.

The server is kept after the run for PERSEVAL_PREFECT_IDLE_S seconds (default
600) with no perseval process using it, and the next run in the same output
root reuses it: starting one takes 6.6 s on a quiet 2-core machine, most of a
cached re-run. Each run holds a lease (a file named by its pid) while it uses
the server; the server's guard stops it once no lease has been held for that
long. PERSEVAL_PREFECT_IDLE_S=0 stops it with the run, as before. The server dies with its guard (a
parent-death signal), and a record whose guard is gone has what it left stopped and is dropped.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

import httpx
import psutil
from filelock import FileLock

from perseval.core.errors import ConfigError
from perseval.llm.deployments import free_port, start_server, stop_server, wait_healthy
from perseval.llm.embedded import HOST
from perseval.llm.guard import alive

IDLE_ENV, DEFAULT_IDLE_S = "PERSEVAL_PREFECT_IDLE_S", 600.0
RECORD, LEASES = "prefect-server.json", "prefect-leases"  # in the run's log folder


def prefect_server_command(port: int) -> list[str]:
    """The launch command of the local Prefect server: loopback only."""
    return [sys.executable, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(port)]


# The wait for a local server that prefect_api started without waiting: taken by wait_ready
_PENDING: list[Callable[[], None]] = []


def _start(log_dir: Path, **guard: Any) -> tuple[subprocess.Popen, str, Path]:
    """`prefect server start` on a free loopback port, no telemetry, no UI: (process, API URL, log file);
    `guard`: start_server's lease arguments for a kept server."""
    port = free_port()
    log_path = log_dir / f"prefect-server-{port}.log"
    env = dict(os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_UI_ENABLED="false")
    env.pop("PREFECT_API_URL", None)
    return start_server(prefect_server_command(port), env, log_path, **guard), f"http://{HOST}:{port}/api", log_path


def _waiter(api: str, proc: subprocess.Popen | None, timeout_s: float, log_path: Path) -> Callable[[], None]:
    return partial(wait_healthy, api, proc, timeout_s, log_path, health_path="/health",
                   name="the local Prefect server")


@contextmanager
def local_prefect_server(log_dir: str | Path = "runs/logs", timeout_s: float = 180.0,
                         wait: bool = True) -> Iterator[str]:
    """Start `prefect server start` on a free loopback port; yield its API URL; stop it after. `wait=False`
    yields as soon as the process is started: the caller calls wait_ready() before its first API request."""
    proc, api, log_path = _start(Path(log_dir))
    ready = _waiter(api, proc, timeout_s, log_path)
    try:
        if wait:
            ready()
        else:
            _PENDING.append(ready)
        yield api
    finally:
        if ready in _PENDING:
            _PENDING.remove(ready)
        stop_server(proc, grace_s=30)


def wait_ready() -> None:
    """Until the local Prefect server prefect_api started answers (at once when there is none or it did)."""
    while _PENDING:
        _PENDING[0]()
        _PENDING.pop(0)


def idle_seconds() -> float:
    """How long a kept server waits for the next run (PERSEVAL_PREFECT_IDLE_S; 0: stop with the run); a value
    that is no finite number of seconds >= 0 is a ConfigError (exit 2), asked before anything starts."""
    raw = os.environ.get(IDLE_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        idle = float(raw)
    except ValueError:
        idle = math.nan
    if not (math.isfinite(idle) and idle >= 0):  # -1 meant 0 and inf kept the server forever
        raise ConfigError(f"${IDLE_ENV}={raw!r}: allowed is a finite number of seconds >= 0, how long a kept "
                          f"local Prefect server waits for the next run (0 stops it with the run; unset: "
                          f"{DEFAULT_IDLE_S:.0f})")
    return idle


def _home() -> str:
    return os.environ.get("PREFECT_HOME") or str(Path.home() / ".prefect")


def kept_server(record: Path) -> dict | None:
    """The kept server a record names, when it can serve this process: its guard alive, the same Prefect
    database (PREFECT_HOME), and answering (or still starting: a run started it moments ago)."""
    try:
        info = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    if not alive(int(info.get("pid", 0))):  # its guard is gone: what it left is stopped, the record dropped
        stop_leftover(info)
        record.unlink(missing_ok=True)
        return None
    if info.get("home") != _home():
        return None
    try:
        httpx.get(info["api"] + "/health", timeout=1.0)
    except httpx.HTTPError:
        if not Path(info.get("log", "")).is_file():
            return None
    return info


def stop_leftover(info: dict) -> list[int]:
    """Stop the server a record names whose guard is gone (killed before servers died with their guard, or
    where no parent-death signal exists), so a run does not start another beside it. Only a process that is
    that server is stopped: in the dead guard's process group (it led one) and running the recorded port's
    `prefect server start`. Returns the pids stopped."""
    group, port = int(info.get("pid", 0)), urlparse(str(info.get("api", ""))).port
    if group <= 0 or port is None:
        return []
    tail = prefect_server_command(port)[1:]  # the interpreter may be another environment's
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if (proc.info["cmdline"] or [])[-len(tail):] == tail and os.getpgid(proc.pid) == group:
                proc.terminate()
                found.append(proc)
        except (psutil.Error, ProcessLookupError):
            continue
    _, left = psutil.wait_procs(found, timeout=10)
    for proc in left:
        proc.kill()
    return [p.pid for p in found]


@contextmanager
def kept_prefect_server(log_dir: str | Path, idle_s: float, timeout_s: float = 180.0) -> Iterator[str]:
    """The output root's kept local Prefect server, started (without waiting, as local_prefect_server) when
    there is none; this process holds a lease on it until the block ends."""
    log_dir = Path(log_dir)
    leases = log_dir / LEASES
    leases.mkdir(parents=True, exist_ok=True)
    lease = leases / str(os.getpid())
    lease.touch()  # before the record is read: a guard that sees it keeps the server up
    record = log_dir / RECORD
    proc, ready = None, None
    try:
        with FileLock(f"{record}.lock", timeout=timeout_s):
            info = kept_server(record)
            if info is None:
                proc, api, log_path = _start(log_dir, leases=leases, idle_s=idle_s)
                info = {"pid": proc.pid, "api": api, "home": _home(), "log": str(log_path)}
                record.write_text(json.dumps(info))
        ready = _waiter(info["api"], proc, timeout_s, Path(info["log"]))
        _PENDING.append(ready)
        yield info["api"]
    finally:
        if ready in _PENDING:
            _PENDING.remove(ready)
        lease.unlink(missing_ok=True)  # the guard stops the server after idle_s with no lease held


@contextmanager
def prefect_api(log_dir: str | Path = "runs/logs") -> Iterator[str]:
    """The configured PREFECT_API_URL, or the output root's kept local server (started if there is none; with
    PERSEVAL_PREFECT_IDLE_S=0 a local server for the duration instead). A started one is not
    waited for here: its start-up (seconds: a Python process importing Prefect's server and opening its
    database) runs on the other core while this process imports the flow's modules (Prefect, Dask,
    MLflow: seconds too); perseval_flows.runtime.run_experiment waits for it (wait_ready) before its first request."""
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    idle_s = idle_seconds()
    server = kept_prefect_server(log_dir, idle_s) if idle_s > 0 else local_prefect_server(log_dir, wait=False)
    with server as api:
        os.environ["PREFECT_API_URL"] = api
        try:
            yield api
        finally:
            os.environ.pop("PREFECT_API_URL", None)
