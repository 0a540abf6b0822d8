"""A local Prefect server for runs that have none configured.

Without an API every Prefect process (and each Dask worker) starts its own
temporary server, about 15 s each; one shared server on 127.0.0.1 avoids that.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from perseval.llm.deployments import HOST, free_port, start_server, stop_server, wait_healthy


def prefect_server_command(port: int) -> list[str]:
    """The launch command of the local Prefect server: loopback only."""
    return [sys.executable, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(port)]


# The wait for a local server that prefect_api started without waiting: taken by wait_ready
_PENDING: list[Callable[[], None]] = []


@contextmanager
def local_prefect_server(log_dir: str | Path = "runs/logs", timeout_s: float = 180.0,
                         wait: bool = True) -> Iterator[str]:
    """Start `prefect server start` on a free loopback port; yield its API URL; stop it after. `wait=False`
    yields as soon as the process is started: the caller calls wait_ready() before its first API request."""
    port = free_port()
    log_path = Path(log_dir) / f"prefect-server-{port}.log"
    env = dict(os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_UI_ENABLED="false")
    env.pop("PREFECT_API_URL", None)
    proc = start_server(prefect_server_command(port), env, log_path)
    api = f"http://{HOST}:{port}/api"

    def ready() -> None:
        wait_healthy(api, proc, timeout_s, log_path, health_path="/health", name="the local Prefect server")

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


@contextmanager
def prefect_api(log_dir: str | Path = "runs/logs") -> Iterator[str]:
    """The configured PREFECT_API_URL, or a local server started for the duration. A started one is not
    waited for here: its start-up (seconds: a Python process importing Prefect's server and opening its
    database) runs on the other core while this process imports the flow's modules (Prefect, Dask,
    MLflow: seconds too); flows.runtime.run_experiment waits for it (wait_ready) before its first request."""
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    with local_prefect_server(log_dir, wait=False) as api:
        os.environ["PREFECT_API_URL"] = api
        try:
            yield api
        finally:
            os.environ.pop("PREFECT_API_URL", None)
