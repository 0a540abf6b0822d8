"""No orphans (issue 45, item 7), with real processes: a kept Prefect server dies with its guard (kill -9 of the
guard left `prefect server start` listening past its idle time), and a run that finds a record whose guard is
gone stops the server it left, only that one, and drops the record instead of starting another beside it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from perseval_flows.prefect_server import _home, _start, kept_server, prefect_server_command
from perseval.llm.deployments import free_port


def _gone(proc: psutil.Process, within_s: float) -> bool:
    try:
        proc.wait(timeout=within_s)
    except psutil.TimeoutExpired:
        return False
    return True


@pytest.mark.integration
def test_a_kept_prefect_server_dies_with_its_guard(tmp_path):
    guard, api, _ = _start(tmp_path, leases=tmp_path / "leases", idle_s=600.0)
    deadline = time.monotonic() + 60
    while not (children := psutil.Process(guard.pid).children()):
        assert time.monotonic() < deadline and guard.poll() is None
        time.sleep(0.1)
    server = children[0]
    assert "server" in server.cmdline() and "start" in server.cmdline()
    time.sleep(2)  # well into its start-up
    guard.kill()  # kill -9
    guard.wait()
    assert _gone(server, 10.0), server.cmdline()  # not after its 600 s idle time


def _sleeper(port: int, new_session: bool) -> subprocess.Popen:
    """A process whose command line ends as a Prefect server's on `port` (it only sleeps)."""
    return subprocess.Popen(_server_like(port), start_new_session=new_session)


def _server_like(port: int) -> list[str]:
    return [sys.executable, "-c", "import time; time.sleep(120)", *prefect_server_command(port)[1:]]


def test_a_stale_record_has_its_leftover_server_stopped_and_nothing_else(tmp_path):
    port = free_port()
    # the leftover: started by a guard (a session leader) that is gone since; its process group stays the guard's
    server_cmd = _server_like(port)
    leader = subprocess.Popen([sys.executable, "-c", f"import os, subprocess; os.setsid(); p = subprocess.Popen("
                               f"{server_cmd!r}); print(p.pid, flush=True); os._exit(0)"], stdout=subprocess.PIPE,
                              text=True)
    leftover = psutil.Process(int(leader.stdout.readline()))
    leader.wait()
    decoy = _sleeper(port, new_session=True)  # the same command line in another process group: not the server
    other = _sleeper(port + 1, new_session=False)
    record = tmp_path / "prefect-server.json"
    record.write_text(json.dumps({"pid": leader.pid, "api": f"http://127.0.0.1:{port}/api", "home": _home(),
                                  "log": str(tmp_path / "x.log")}))
    try:
        assert os.getpgid(leftover.pid) == leader.pid and leftover.is_running()
        assert kept_server(record) is None
        assert _gone(leftover, 15.0) and not record.exists()
        assert decoy.poll() is None and other.poll() is None
    finally:
        for p in (decoy, other):
            p.kill()
            p.wait()
        if leftover.is_running():
            leftover.kill()


def test_a_watched_server_stops_when_its_starters_pipe_closes_even_with_the_starter_still_its_parent(tmp_path):
    """The guard's second watch: perseval's pipe reads end-of-file the moment perseval is gone, whatever process
    adopts the guard (a PID namespace's init, a subreaper). Here the starter stays the guard's parent and only
    closes the pipe, so the parent check alone would never fire."""
    from perseval.llm.deployments import start_server

    guard = start_server([sys.executable, "-c", "import time; time.sleep(120)"], dict(os.environ),
                         tmp_path / "sleeper.log")
    deadline = time.monotonic() + 30
    while not (children := psutil.Process(guard.pid).children()):
        assert time.monotonic() < deadline and guard.poll() is None
        time.sleep(0.1)
    server = children[0]
    time.sleep(1.5)  # three parent checks: the guard keeps a server whose starter is alive and holds the pipe
    assert guard.poll() is None and server.is_running()
    guard.stdin.close()
    assert _gone(server, 15.0), server.cmdline()
    assert guard.wait(15) is not None
