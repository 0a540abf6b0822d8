"""`perseval run` as a subprocess, for the end-to-end tests that interrupt runs (test_recovery_integration,
test_kill_resume): a small experiment on the embedded model, the command, its summary and the servers it
started. Its fixtures are module-scoped: a module that imports them gets its own workdir and reference run."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from perseval.experiment.load import load_experiment
from perseval.pipeline.plan import make_plan

from .conftest import config_tree, cpu_overrides

MODEL = "smollm2-small"
EXP = {
    "name": "recovery", "seed": 11, "repeats": 1, "shard_size": 1, "output_root": "runs",
    "backbones": [MODEL], "retrievers": ["minilm"], "judges": ["judge-small"],
    "benchmarks": [{"name": "iba", "sample": 2, "agents": ["iba-no-history"],
                    "params": {"noise_per_evidence": 2, "scenarios": ["Academic paper writing", "Weekly plan"]}}],
    "overrides": cpu_overrides(),  # the CPU budgets (the shipped agent YAMLs hold the paper's)
    "dask": {"n_workers": 1, "threads_per_worker": 1},  # one shard at a time: a kill falls between parts
    "mlflow": {"experiment": "recovery", "tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_root": "mlruns/art"},
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("recovery")
    cfg = config_tree(root, MODEL, 48)
    (cfg / "judges" / "judge-small.yaml").write_text(yaml.safe_dump({"name": "judge-small", "model": MODEL}))
    (cfg / "experiments" / "recovery.yaml").write_text(yaml.safe_dump(EXP))
    return root


def cli_run(workdir: Path, api: str | None, root: Path, tag: str, experiment: str = "recovery",
            env_extra: dict | None = None, new_session: bool = False) -> subprocess.Popen:
    env = dict(os.environ, **(env_extra or {}))
    env.pop("PREFECT_API_URL", None)
    if api:  # else perseval starts its own local Prefect server
        env["PREFECT_API_URL"] = api
    out = open(workdir / f"out-{tag}.log", "w")
    return subprocess.Popen([sys.executable, "-m", "perseval_flows.cli", "run", f"configs/experiments/{experiment}.yaml",
                             "--output-root", str(root), "--summary-json", str(workdir / f"summary-{tag}.json"),
                             "--quiet"], cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=new_session)


def finish(proc: subprocess.Popen, workdir: Path, tag: str, timeout: float = 1500) -> tuple[int, dict, str]:
    rc = proc.wait(timeout)
    out = (workdir / f"out-{tag}.log").read_text()
    summary = workdir / f"summary-{tag}.json"
    return rc, json.loads(summary.read_text()) if summary.exists() else {}, out


def server_of(logs: Path, name: str) -> tuple[int, int]:
    """(pid, port) of the server a run started: the port from its log name, the PID from the process table
    (the server itself, not the guard that watches it)."""
    log = next(logs.glob(f"{name}-*.log"))
    port = log.stem.rsplit("-", 1)[1]
    deadline = time.monotonic() + 30  # the log is opened before the guard has started the server itself
    while time.monotonic() < deadline:
        for p in psutil.process_iter(["pid", "cmdline"]):
            cmd = p.info["cmdline"] or []
            if "--port" in cmd and port in cmd and "guard.py" not in " ".join(cmd) and \
                    ("llama_cpp.server" in cmd or Path(cmd[0]).name == "llama-server" or "prefect" in " ".join(cmd)):
                return p.info["pid"], int(port)
        time.sleep(0.2)
    raise AssertionError(f"no server process on port {port}")


def headline_scores(summary: dict) -> dict[str, float | None]:
    """agent/judge -> score (None: a cell with nothing to score)."""
    return {f"{r['agent']}/{r['judge']}": r["score"] for r in summary["headline"]}


def plan_keys(workdir: Path, experiment: str = "recovery"):
    """(plan, its one run unit, its LLM-judged unit) of an experiment with one agent and one LLM judge."""
    plan = make_plan(load_experiment(workdir / "configs" / "experiments" / f"{experiment}.yaml"))
    [run] = plan.runs()
    judged = next(j for j in plan.judgings() if j.judge.uses_llm)
    return plan, run, judged


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def experiment(workdir) -> str:
    """The experiment (under workdir/configs/experiments) that `reference` runs; a module may override it."""
    return "recovery"


@pytest.fixture(scope="module")
def reference(workdir, prefect_api, experiment) -> dict:
    """An uninterrupted run of `experiment` under `workdir/reference`: the scores every resumed run must end with."""
    rc, summary, out = finish(cli_run(workdir, prefect_api, workdir / "reference", "reference", experiment),
                              workdir, "reference")
    assert rc == 0, out[-3000:]
    # every cell complete, and scored wherever it has something to score (the slot rule has nothing to
    # score when the sample holds no CallAPI task: score None, n 0)
    # (a cell with nothing to judge is "no items", never "complete" with n 0)
    # ("partly scored": fewer than half of its instances have a score, a weak judge's unreadable verdicts)
    assert all((r["status"] in ("complete", "partly scored") and r["score"] is not None)
               or (r["status"] == "no items" and r["n"] == 0)
               for r in summary["headline"]), summary["headline"]
    assert any(r["score"] is not None for r in summary["headline"]), summary["headline"]
    return summary
