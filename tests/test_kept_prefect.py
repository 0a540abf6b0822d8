"""The kept local Prefect server (issue 33): a run leaves it up for the next one in the same output root,
which reuses it instead of starting another (6.6 s here); it stops once no run has held it for the idle time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from perseval_flows.prefect_server import LEASES, RECORD, kept_prefect_server, wait_ready

pytestmark = pytest.mark.integration

USER = """
import sys, httpx
from perseval_flows.prefect_server import kept_prefect_server, wait_ready
with kept_prefect_server(sys.argv[1], idle_s=float(sys.argv[2])) as api:
    wait_ready()
    assert httpx.get(api + "/health", timeout=5).status_code == 200
    print(api)
"""


def _use(log_dir, idle_s: float) -> str:
    """One process that uses the kept server and exits, as `perseval run` does."""
    proc = subprocess.run([sys.executable, "-c", USER, str(log_dir), str(idle_s)], capture_output=True, text=True,
                          timeout=240, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.25)
    return False


def test_a_second_run_reuses_the_kept_server_and_it_stops_after_the_idle_time(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    logs = tmp_path / "logs"
    first = _use(logs, idle_s=6)
    info = json.loads((logs / RECORD).read_text())
    assert info["api"] == first and httpx.get(first + "/health", timeout=5).status_code == 200  # outlived its run
    assert _use(logs, idle_s=6) == first  # the next run: the same server, none started
    assert len(list(logs.glob("prefect-server-*.log"))) == 1
    with kept_prefect_server(logs, idle_s=6) as api:  # a lease held past the idle time keeps it up
        wait_ready()
        assert api == first and list((logs / LEASES).iterdir()) == [logs / LEASES / str(os.getpid())]
        time.sleep(8)
        assert httpx.get(api + "/health", timeout=5).status_code == 200
    assert not list((logs / LEASES).iterdir())
    assert _gone(info["pid"], within_s=30)  # no lease for 6 s: the guard stopped the server and itself
    with pytest.raises(httpx.HTTPError):
        httpx.get(first + "/health", timeout=2)


def test_a_run_with_another_prefect_home_does_not_reuse_the_server(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "a"))
    first = _use(logs, idle_s=3)
    pid = json.loads((logs / RECORD).read_text())["pid"]
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "b"))
    second = _use(logs, idle_s=3)
    assert second != first  # its own database: a server of its own
    assert _gone(pid, within_s=30) and _gone(json.loads((logs / RECORD).read_text())["pid"], within_s=30)
