"""A real run past 2,000 instances (where the record's instances go to Parquet) through `perseval run`, against
the stand-in server as its own process: it exits 0, sends one request per instance and agent that needs a
model, its record reads back whole, and the cached re-run sends none. The scale figures come from
scripts/bench_scale.py, run by hand; this is its small version."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from perseval.report.record import INLINE_INSTANCES, read_record, records_dir
from perseval.llm.standin import standin_process
from scripts.bench_scale import write_configs, write_release

pytestmark = pytest.mark.integration

PER_TASK = 1100  # LaMP-2 and LaMP-4: 2,200 instances


def _run(config, work, tag):
    summary = work / f"{tag}.json"
    done = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", str(config), "--quiet", "--summary-json",
                           str(summary)], cwd=work, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(summary.read_text())


def test_a_run_of_2200_instances_exits_0_and_its_record_reads_back(tmp_path):
    write_release(tmp_path / "release", PER_TASK, profile_items=2)
    with standin_process() as url:
        config = write_configs(tmp_path, PER_TASK, f"{url}/v1", 64, None, agents=("lamp-oracle", "lamp-no-profile"),
                               retrievers=(), controls=())
        cold = _run(config, tmp_path, "cold")
        again = _run(config, tmp_path, "again")
    assert cold["llm_requests"] == 2 * PER_TASK  # the no-profile agent's; the oracle sends none
    assert again["llm_requests"] == 0
    [folder] = [p for p in records_dir(tmp_path / "runs").iterdir() if p.name == cold["mlflow_run_id"]]
    record = read_record(folder)
    assert record.instances_file and len(record.instances) == 2 * 2 * PER_TASK > INLINE_INSTANCES
    assert {i.status for i in record.instances} <= {"scored", "unscored", "failed", "invalid", "not_judged"}
