"""`perseval ui` answers at once: its port listens before MLflow's server is imported, and every request gets a
503 page saying what the UI waits for (a port already taken: one line, exit 2); then MLflow's own app serves the
store on the same socket (its health, its tracking API), and a SIGTERM stops it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from perseval.llm.deployments import free_port
from perseval_flows.ui import Waiting, listening, placeholder, ui_command


def test_the_placeholder_answers_every_request_with_what_the_ui_waits_for():
    port = free_port()
    waiting = Waiting()
    sock = listening("127.0.0.1", port)
    server = placeholder(sock, waiting)
    try:
        waiting.enter("importing MLflow's tracking server")
        for method, path in (("GET", "/"), ("GET", "/health"), ("POST", "/api/2.0/mlflow/runs/search")):
            answer = httpx.request(method, f"http://127.0.0.1:{port}{path}", timeout=5)
            assert answer.status_code == 503 and answer.headers["retry-after"] == "2"
            assert "Now: importing MLflow's tracking server" in answer.text and "reloads itself" in answer.text
        taken = subprocess.run(ui_command("sqlite:///x.db", "file:///tmp/x", port), capture_output=True, text=True)
        assert taken.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in taken.stderr
        assert "Traceback" not in taken.stderr and "--port" in taken.stderr
        server.shutdown()
        assert sock.fileno() != -1  # still listening: the UI's server takes the same socket over
    finally:
        sock.close()


@pytest.mark.integration
def test_the_ui_serves_mlflow_on_the_socket_it_answered_on_first(tmp_path):
    port = free_port()
    db, artifacts = tmp_path / "mlruns" / "mlflow.db", tmp_path / "mlruns" / "artifacts"
    db.parent.mkdir()
    cmd = ui_command(f"sqlite:///{db}", artifacts.as_uri(), port)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    base, seen = f"http://127.0.0.1:{port}", []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                seen.append(httpx.get(f"{base}/health", timeout=2).status_code)
            except httpx.HTTPError:
                seen.append(None)
            if seen[-1] == 200:
                break
            time.sleep(0.2)
        assert seen[-1] == 200, seen[-20:]
        assert 503 in seen and None not in seen[seen.index(503):]  # answered while importing, never refused after
        experiments = httpx.get(f"{base}/api/2.0/mlflow/experiments/search?max_results=5", timeout=30).json()
        assert [e["name"] for e in experiments["experiments"]] == ["Default"] and db.is_file()  # a new store made
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode is not None and "importing MLflow's tracking server" in out
    assert f"MLflow UI on {base}" in out and out.index("importing") < out.index("MLflow UI on")
