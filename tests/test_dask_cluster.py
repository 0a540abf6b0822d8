"""Beyond one machine: the evaluate flow's tasks on an existing Dask cluster (a `dask scheduler` and two
`dask worker` processes on 127.0.0.1), as `dask: {address: ...}` or `--dask-address` asks."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from distributed import Client

from perseval.llm.deployments import free_port

from .conftest import CONFIGS, shipped_configs

pytestmark = pytest.mark.integration


@pytest.fixture()
def cluster(tmp_path):
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    py = [sys.executable, "-m"]
    procs = [subprocess.Popen([*py, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                               str(port), "--no-dashboard"], stdout=open(tmp_path / "scheduler.log", "wb"),
                              stderr=subprocess.STDOUT, start_new_session=True)]
    with Client(address, timeout="60s") as client:  # waits for the scheduler
        for i in range(2):
            procs.append(subprocess.Popen([*py, "distributed.cli.dask_worker", address, "--nthreads", "1",
                                           "--no-dashboard", "--name", f"w{i}"],
                                          stdout=open(tmp_path / f"worker{i}.log", "wb"), stderr=subprocess.STDOUT,
                                          start_new_session=True))
        client.wait_for_workers(2, timeout=120)
    yield address
    for proc in reversed(procs):
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def test_the_quickstart_iba_slice_runs_on_an_existing_scheduler(prefect_api, cluster, tmp_path):
    cfg = shipped_configs(tmp_path)
    quick = yaml.safe_load((CONFIGS / "experiments" / "quickstart.yaml").read_text())
    quick["benchmarks"] = [{**quick["benchmarks"][0], "sample": 2, "agents": ["iba-no-history", "iba-oracle"]}]
    quick["shard_size"] = 1
    quick["dask"] = {"address": cluster}
    (cfg / "experiments" / "iba.yaml").write_text(yaml.safe_dump(quick))
    summary = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/iba.yaml", "--quiet",
                           "--summary-json", str(summary)], cwd=tmp_path,
                          env=dict(os.environ, PREFECT_API_URL=prefect_api), capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(summary.read_text())["headline"]
    assert {(r["agent"], r["judge"]) for r in rows} == {(a, j) for a in ("iba-no-history", "iba-oracle")
                                                        for j in ("smollm2-judge", "iba.slots")}
    with Client(cluster) as client:  # the stage tasks ran on the cluster's workers, not a local one
        prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert {"construct_task", "run_shard_task", "judge_task", "score_task"} <= set(prefixes), prefixes
