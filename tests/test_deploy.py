"""`perseval deploy` registers a scheduled deployment on a real local Prefect server."""
from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from .conftest import CONFIGS, REPO

pytestmark = pytest.mark.integration


def test_deploy_registers_flow_with_active_cron_schedule(prefect_api):
    env = dict(os.environ, PREFECT_API_URL=prefect_api)
    proc = subprocess.run([sys.executable, "-m", "flows.cli", "deploy", str(CONFIGS / "experiments" / "quickstart.yaml"),
                           "--cron", "0 2 * * *", "--name", "nightly-quickstart"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    found = httpx.post(f"{prefect_api}/deployments/filter",
                       json={"deployments": {"name": {"any_": ["nightly-quickstart"]}}}, timeout=30).json()
    assert len(found) == 1
    dep = found[0]
    assert dep["parameters"]["config_path"].endswith("configs/experiments/quickstart.yaml")
    schedules = dep["schedules"]
    assert len(schedules) == 1 and schedules[0]["active"] is True
    assert schedules[0]["schedule"]["cron"] == "0 2 * * *"
    flow = httpx.get(f"{prefect_api}/flows/{dep['flow_id']}", timeout=30).json()
    assert flow["name"] == "perseval-scheduled-evaluate"
