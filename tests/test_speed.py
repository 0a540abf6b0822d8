"""The cheap speed-ups: the embedded server on all cores (a serving choice that keys nothing), and what a
re-run with every output done starts: no model server (perseval.freshness) and no Dask cluster."""
from __future__ import annotations

import os
from pathlib import Path

import psutil

from flows.runtime import task_runner
from perseval.config import DaskSettings, DeploymentConfig, ModelConfig
from perseval.experiment import load_experiment
from perseval.llm.deployments import embedded_command
from perseval.plan import make_plan

from .conftest import CONFIGS

MODEL = ModelConfig(name="tiny", format="gguf", source="x.gguf", deployment="d")


def _flag(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_embedded_server_gets_every_core_unless_the_deployment_says_otherwise():
    dep = DeploymentConfig(name="d", kind="embedded")
    cmd = embedded_command(MODEL, dep, Path("x.gguf"), 8000)
    assert _flag(cmd, "--n_threads") == _flag(cmd, "--n_threads_batch") == str(os.cpu_count())
    cmd = embedded_command(MODEL, dep.model_copy(update={"n_threads": 3}), Path("x.gguf"), 8000)
    assert _flag(cmd, "--n_threads") == _flag(cmd, "--n_threads_batch") == "3"


def test_threads_enter_no_key():
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    keys = [u.key for u in make_plan(exp).runs()] + [u.key for u in make_plan(exp).judgings()]
    for dep in exp.deployments.values():
        dep.n_threads = 1
    assert [u.key for u in make_plan(exp).runs()] + [u.key for u in make_plan(exp).judgings()] == keys


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_the_dask_cluster_starts_on_the_first_submitted_task_not_with_the_flow():
    """The flow enters its task runner at the start; a re-run that submits nothing must not pay for workers."""
    before = _children()
    with task_runner(DaskSettings(n_workers=1)) as runner:
        assert _children() - before == set()  # entered, as the flow does: no scheduler, no worker yet
        runner.client  # what the first submit does
        assert _children() - before  # now a worker process runs
