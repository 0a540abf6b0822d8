"""Ctrl-C stops a run within 5 s (issue 45, item 2): a real `perseval run` on the embedded model, interrupted
as a terminal does (SIGINT to its process group) once it sends the run stage's requests. It exits 130 with the
one line saying what is kept and how to resume, sends nothing after the signal, leaves no model server behind,
and the resume sends no request the interrupted run had answered, nor any request twice. The line is the last
thing printed (issue 53: no Dask CancelledError or resource-tracker warning after it), and no claim is left
"in flight" in the request cache."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import psutil
import pytest
import yaml

from perseval_flows.interrupt import INTERRUPT_EXIT

from .cli_runs import EXP, cli_run, finish
from .conftest import config_tree

pytestmark = pytest.mark.integration
MODEL = "smollm2-small"


def _sent(capture: Path) -> list[dict]:
    return [json.loads(line) for line in capture.read_text().splitlines()] if capture.exists() else []


def _servers_of(pid: int) -> list[psutil.Process]:
    """The llama-servers a run (pid) started: their guards' command lines name that pid."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if "guard.py" in " ".join(cmd) and str(pid) in cmd and any("llama-server" in c for c in cmd):
            out.append(p)
    return out


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "local-cluster"])
def test_ctrl_c_stops_within_5_s_and_the_resume_sends_nothing_answered(tmp_path, in_process):
    cfg = config_tree(tmp_path, MODEL, 48)
    (cfg / "judges" / "judge-small.yaml").write_text(yaml.safe_dump({"name": "judge-small", "model": MODEL}))
    exp = {**EXP, "name": "interrupt", "benchmarks": [{**EXP["benchmarks"][0], "sample": 4}],
           "dask": {"n_workers": 2, "threads_per_worker": 1, "in_process": in_process}}
    (cfg / "experiments" / "interrupt.yaml").write_text(yaml.safe_dump(exp))
    root, first = tmp_path / "runs", tmp_path / "first.jsonl"
    env = {"PERSEVAL_CAPTURE_REQUESTS": str(first), "PERSEVAL_PREFECT_IDLE_S": "0"}
    proc = cli_run(tmp_path, None, root, "first", "interrupt", env_extra=env, new_session=True)
    deadline = time.monotonic() + 900
    while not any(r["stage"] == "agent" for r in _sent(first)):  # in the run stage, requests in flight
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "out-first.log").read_text()
        time.sleep(0.2)
    servers = _servers_of(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the whole foreground group
    sent_at = time.monotonic()
    rc, _, out = finish(proc, tmp_path, "first", timeout=30)
    stopped_s = time.monotonic() - sent_at
    assert rc == INTERRUPT_EXIT and stopped_s < 5.0, (rc, stopped_s, out)
    assert "interrupted:" in out and f"kept under {root}" in out and "resume" in out, out
    n_sent = len(_sent(first))
    time.sleep(3)
    assert len(_sent(first)) == n_sent  # nothing sent after the signal, by any process of the run
    after = (tmp_path / "out-first.log").read_text()
    assert len(after[after.index("interrupted:"):].splitlines()) == 1, after  # no Dask or semaphore warning after
    with closing(sqlite3.connect(root / "request-cache.sqlite")) as con:
        assert con.execute("SELECT * FROM inflight").fetchall() == []  # no claim left "in flight"
    assert servers and all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in servers)
    answered = {r["cache_key"] for r in _sent(first) if r["status"] == "ok"}

    second = tmp_path / "second.jsonl"
    proc = cli_run(tmp_path, None, root, "second", "interrupt", env_extra={**env, "PERSEVAL_CAPTURE_REQUESTS":
                                                                             str(second)})
    rc, summary, out = finish(proc, tmp_path, "second")
    assert rc in (0, 3), out
    resent = [r["cache_key"] for r in _sent(second)]
    assert not answered & set(resent)  # nothing the interrupted run had answered
    assert summary["llm_requests"] == summary["llm_distinct_requests"] == len(resent) == len(set(resent))
