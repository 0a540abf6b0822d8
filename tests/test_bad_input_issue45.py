"""Bad inputs of issue 45 that are the client's and the runner's:

| #  | bad input                                                   | caught at     | what is said / done                       |
|----|-------------------------------------------------------------|---------------|-------------------------------------------|
| 1  | an endpoint that takes TCP but speaks no HTTP (an SSH port) | start (probe) | deployment YAML, `base_url`, not HTTP; 4  |
| 2  | `PERSEVAL_PREFECT_IDLE_S=-1` (meant 0)                      | validate, run | the variable, finite >= 0; exit 2         |
| 3  | `PERSEVAL_PREFECT_IDLE_S=inf` (kept the server forever)     | validate, run | the variable, finite >= 0; exit 2         |
| 4  | `PERSEVAL_PREFECT_IDLE_S=abc` (exit 1)                      | validate, run | the variable, finite >= 0; exit 2         |
| 5  | `PERSEVAL_PREFECT_IDLE_S=nan`                               | validate, run | the variable, finite >= 0; exit 2         |
"""
from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Iterator

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.failure import what_failed
from flows.prefect_server import IDLE_ENV
from perseval.core.errors import DeploymentError

from .conftest import REPO
from .test_bad_input_more import KEY, _api, run_on_endpoint

BANNER = b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n"


@contextmanager
def not_http() -> Iterator[str]:
    """A loopback TCP server that answers every connection as an SSH server does (its banner, then a close once
    it has read what the client sent); yields an http:// base URL to it."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.sendall(BANNER)
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(b"Invalid SSH identification string.\r\n")
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    finally:
        stop.set()
        srv.close()


def test_an_endpoint_that_speaks_no_http_stops_the_start_like_a_refused_one(monkeypatch):
    monkeypatch.setenv("PERSEVAL_PROBE_KEY", KEY)
    with not_http() as url, pytest.raises(DeploymentError) as err:
        _api(url).start()
    line = what_failed(err.value)
    assert "\n" not in line and line.startswith("model api-model (openai deployment probe-me): "), line
    assert f"configs/deployments/probe-me.yaml: key 'base_url': what answers at {url} is not an HTTP server" in line
    assert "RemoteProtocolError" in line and "running again cannot fix" in line, line


@pytest.mark.integration
def test_a_run_on_an_endpoint_that_speaks_no_http_ends_exit_4_not_3(tmp_path, configs, prefect_api):
    """Before: every row failed and the run ended exit 3, "run the same command again". Now exit 4 at start."""
    with not_http() as url:
        done, errors = run_on_endpoint(url, tmp_path, configs, prefect_api)
    assert done.returncode == 4 and len(errors) == 1, done.stdout + done.stderr
    assert f"key 'base_url': what answers at {url} is not an HTTP server" in errors[0], errors
    assert "run the same command again" not in done.stdout
    assert not (tmp_path / "out" / "run").exists()


@pytest.mark.parametrize("value", ["-1", "inf", "abc", "nan", "-0.5"])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_bad_prefect_idle_setting_is_exit_2_before_anything_starts(value, command, monkeypatch, tmp_path):
    monkeypatch.setenv(IDLE_ENV, value)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [command, str(REPO / "configs" / "experiments" / "quickstart.yaml"),
                                      *(["--output-root", str(out)] if command == "run" else [])])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert f"${IDLE_ENV}={value!r}: allowed is a finite number of seconds >= 0" in line, line
    assert not out.exists()  # no Prefect server, no log folder: nothing started


@pytest.mark.parametrize("value, seconds", [("0", 0.0), ("2.5", 2.5), ("", 600.0)])
def test_a_good_prefect_idle_setting_is_taken(value, seconds, monkeypatch):
    from flows.prefect_server import idle_seconds

    monkeypatch.setenv(IDLE_ENV, value)
    assert idle_seconds() == seconds
