"""A model server that dies during a run (issue 35), on the real embedded llama-server: killed by its PID with
requests answered and one in flight, it is noticed by the pool within a moment, said in one warning line
naming its log, and sent nothing more: not the in-flight request's retries, not the requests queued behind it,
not a client made for the next stage (refused: the stage stops); leaving the pool stops the run with the same
line. Whether anything reached the dead port after the notice is not inferred from logs: the test listens on
that port itself, once the server is gone, and counts the connections.

Kept under a minute: one small model, a few short requests. The whole `perseval run` with a server killed
mid-stage (exit 4, then a resume to the uninterrupted scores) is tests/test_recovery_integration.py."""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from perseval_flows.failure import what_failed
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import ServerPool
from perseval.llm.endpoint import ServerExited
from perseval.llm.settings import DeploymentConfig, ModelConfig, Sampling
from perseval.experiment.config import load_config

from .cli_runs import server_of
from .conftest import CONFIGS

pytestmark = pytest.mark.integration
MODEL = "smollm2-135m"


class PortWatch:
    """Listens on a port and counts the connections made to it (what a client would send to a dead server)."""

    def __init__(self, port: int):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.connections = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self) -> int:
        time.sleep(0.5)  # a connection made just now is counted too
        self._done.set()
        self._thread.join(5)
        self.sock.close()
        return self.connections


def _wait_for(predicate, timeout: float) -> float:
    """Seconds until `predicate()` held (fails the test past `timeout`)."""
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < timeout, "not noticed in time"
        time.sleep(0.02)
    return time.monotonic() - t0


def _pool(tmp_path: Path) -> ServerPool:
    model = ModelConfig(**yaml.safe_load((CONFIGS / "models" / f"{MODEL}.yaml").read_text()))
    dep = load_config(DeploymentConfig, CONFIGS / "deployments" / f"{model.deployment}.yaml")
    return ServerPool({MODEL: model}, {MODEL: dep}, tmp_path / "logs",
                      {f"deployments/{dep.name}": str(CONFIGS / "deployments" / f"{dep.name}.yaml")})


def _ask(client: LLMClient, text: str, max_tokens: int = 8):
    return client.chat([{"role": "user", "content": text}], max_tokens=max_tokens)


def test_a_dead_embedded_server_is_said_in_one_line_and_sent_nothing_more(tmp_path, caplog):
    cache = RequestCache(tmp_path / "cache.sqlite")
    pool = _pool(tmp_path)
    seen: dict = {}

    async def stage(endpoint) -> None:
        client = LLMClient(endpoint, Sampling(max_tokens=8), cache, role="judge", run_id="r", seed=1)
        try:
            answered = await asyncio.gather(*(_ask(client, f"Say {w}.") for w in ("yes", "no")))
            assert [a.status for a in answered] == ["ok", "ok"], answered
            in_flight = asyncio.create_task(_ask(client, "Write a long story about a lighthouse.", 400))
            await asyncio.sleep(0.5)  # sent, being decoded
            pid, port = server_of(tmp_path / "logs", MODEL)
            os.kill(pid, signal.SIGKILL)
            seen["noticed_s"] = await asyncio.to_thread(_wait_for, lambda: bool(pool.exited), 10)
            watch = PortWatch(port)  # the dead server's port, from the moment it was noticed
            queued = await asyncio.gather(*(_ask(client, f"Count to {n}.") for n in range(4)))
            late = await in_flight
            with pytest.raises(ServerExited):  # the next stage's client: refused, so that stage stops
                LLMClient(endpoint, Sampling(), cache, role="judge", run_id="r", seed=1)
            seen.update(queued=queued, late=late, connections=watch.close())
        finally:
            await client.aclose()

    with caplog.at_level(logging.WARNING, logger="perseval.deployments"):
        with pytest.raises(ServerExited) as stopped:
            with pool:
                endpoint = pool.ensure({MODEL})[MODEL]
                asyncio.run(stage(endpoint))
                with pytest.raises(ServerExited):  # a later stage that asks the pool for its model
                    pool.ensure({MODEL})
            # leaving the pool normally (the serving stages done) raises it too: the later stages do not run

    log_path = next((tmp_path / "logs").glob(f"{MODEL}-*.log"))
    said = [r.getMessage() for r in caplog.records if r.name == "perseval.deployments"]
    assert len(said) == 1 and "\n" not in said[0], said  # one line, once
    cause = f"model {MODEL} (embedded deployment smollm2-135m-cpu): its server exited with code 137 (killed by SIGKILL)"
    assert said[0].startswith(cause) and f"(server log: {log_path})" in said[0], said
    assert seen["noticed_s"] < 2, seen["noticed_s"]
    line = what_failed(stopped.value)  # what `perseval run` prints after "run stopped: "
    assert line.startswith(cause) and line.endswith(f"(server log: {log_path})") and "\n" not in line, line

    assert seen["connections"] == 0, "a request reached the dead server's port after its exit was noticed"
    assert all(r.status == "failed" and r.error.startswith(f"not sent: {cause}") for r in seen["queued"])
    assert seen["late"].status == "failed" and cause in seen["late"].error, seen["late"].error
    # the request log holds what was sent: the two answers and the one in flight, all begun before the notice
    notice = log_path.with_suffix(".exited").stat().st_mtime
    assert cache.request_counts("r") == {"judge": {"ok": 2, "failed": 1}}
    with cache._conn() as con:
        starts = [ts - latency for ts, latency in con.execute("SELECT ts, latency_s FROM requests")]
    assert all(start < notice for start in starts), (starts, notice)
