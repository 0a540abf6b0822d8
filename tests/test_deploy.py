"""Scheduled deployments the way users run them: a real local Prefect server, a process work pool and a
worker (infra/prefect/worker.sh), a deployment with a schedule and parameters, runs triggered through
the API as the scheduler triggers them, MLflow records, and a second run that sends no request."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from mlflow.tracking import MlflowClient

from .conftest import CONFIGS, REPO

pytestmark = pytest.mark.integration
POOL = "perseval-test-pool"


def _experiment(root: Path) -> Path:
    cfg = root / "configs"
    for kind in ("models", "deployments", "agents", "retrievers", "judges"):
        (cfg / kind).mkdir(parents=True)
        for f in (CONFIGS / kind).glob("*.yaml"):
            (cfg / kind / f.name).write_text(f.read_text())
    exp = {"name": "nightly", "seed": 3, "shard_size": 2, "output_root": str(root / "runs"),
           "backbones": ["smollm2-135m"], "retrievers": ["minilm"],
           "benchmarks": [{"name": "apeb", "sample": 5, "agents": ["apeb-no-history", "apeb-oracle"]}],
           "mlflow": {"experiment": "nightly", "tracking_uri": f"sqlite:///{root / 'mlflow.db'}",
                      "artifact_root": str(root / "artifacts")}}
    (cfg / "experiments").mkdir()
    path = cfg / "experiments" / "nightly.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path


def _wait_final(api: str, run_id: str, timeout_s: float = 900) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = httpx.get(f"{api}/flow_runs/{run_id}", timeout=30).json()
        if run["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            return run
        time.sleep(3)
    raise AssertionError(f"flow run {run_id} did not finish in {timeout_s}s")


@pytest.fixture()
def worker(prefect_api, tmp_path):
    env = dict(os.environ, PREFECT_API_URL=prefect_api, PERSEVAL_PYTHON=sys.executable)
    log = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen(["bash", str(REPO / "infra" / "prefect" / "worker.sh"), POOL], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    yield proc
    os.killpg(proc.pid, signal.SIGTERM)
    try:  # the test's flow runs have ended; a Prefect worker took the whole minute to stop after SIGTERM
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # so the group we started is ended: nothing of it is asserted after
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    log.close()


def test_a_worker_runs_the_scheduled_deployment_and_a_rerun_sends_nothing(prefect_api, worker, tmp_path):
    path = _experiment(tmp_path)
    env = dict(os.environ, PREFECT_API_URL=prefect_api)
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "deploy", str(path), "--cron", "0 2 * * *",
                           "--name", "nightly-apeb", "--pool", POOL, "--sample", "2"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (dep,) = httpx.post(f"{prefect_api}/deployments/filter",
                        json={"deployments": {"name": {"any_": ["nightly-apeb"]}}}, timeout=30).json()
    assert dep["work_pool_name"] == POOL and dep["parameters"] == {"config_path": str(path.resolve()), "sample": 2}
    (schedule,) = dep["schedules"]
    assert schedule["active"] is True and schedule["schedule"]["cron"] == "0 2 * * *"

    mlflow = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    requests = []
    for _ in range(2):  # what the scheduler does at 02:00: create a flow run of the deployment
        run = httpx.post(f"{prefect_api}/deployments/{dep['id']}/create_flow_run", json={}, timeout=30).json()
        final = _wait_final(prefect_api, run["id"])
        assert final["state"]["type"] == "COMPLETED", (final["state"], (tmp_path / "worker.log").read_text()[-3000:])
        exp = mlflow.get_experiment_by_name("nightly")
        parents = [r for r in mlflow.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])
                   if "mlflow.parentRunId" not in r.data.tags]
        requests.append(parents[0].data.metrics["llm_requests"])
        children = mlflow.search_runs([exp.experiment_id],
                                      filter_string=f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
        assert {c.data.params["benchmark.sample"] for c in children} == {"2"}  # the deployment's override
    assert requests[0] > 0 and requests[1] == 0
