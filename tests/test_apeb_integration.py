"""APeB end to end on real parts, from behaviour logs on disk: CSV logs in the documented schema ->
mining -> MiniLM + FAISS history index -> the embedded llama.cpp server (ReAct with JSON steps, the
rubric judge) -> Prefect + Dask -> MLflow with the paper's tables. One session, four cells."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from perseval.benchmarks.apeb.logfiles import write_logs
from perseval.benchmarks.apeb.synth_logs import generate_logs

from .conftest import CONFIGS, shipped_yaml
from perseval.experiment.load import BENCHMARKS_DIR

pytestmark = pytest.mark.integration

EXPERIMENT = {
    "name": "apeb-tiny", "seed": 7, "repeats": 1, "shard_size": 4, "output_root": "runs",
    "backbones": ["smollm2-135m"], "retrievers": ["minilm"], "judges": ["rubric"],
    "benchmarks": [{"name": "apeb", "sample": 1, "source": "logs",
                    "agents": ["apeb-oracle", "apeb-random", "apeb-pps", "apeb-react-json"]}],
    "dask": {"n_workers": 2, "threads_per_worker": 1},
    "mlflow": {"experiment": "apeb-tiny", "tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_root": "mlruns/art"},
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("apeb")
    cfg = root / "configs"
    for kind in ("agents", "retrievers", "deployments", "models"):
        (cfg / kind).mkdir(parents=True)
        for f in shipped_yaml(kind):
            (cfg / kind / f.name).write_text(f.read_text())
    react = yaml.safe_load(((BENCHMARKS_DIR / "apeb" / "configs" / "agents" / "apeb-react-json.yaml")).read_text())
    react["params"].update(max_steps=2, step_max_tokens=64, thought_chars=60)  # keep the CPU run short
    (cfg / "agents" / "apeb-react-json.yaml").write_text(yaml.safe_dump(react))
    (cfg / "judges").mkdir()
    (cfg / "judges" / "rubric.yaml").write_text(yaml.safe_dump(
        {"name": "rubric", "kind": "apeb.rubric", "model": "smollm2-135m",
         "sampling": {"temperature": 0.0, "max_tokens": 64}, "params": {"max_tokens": 64}}))
    (cfg / "experiments").mkdir()
    (cfg / "experiments" / "apeb.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    write_logs(generate_logs(1, 7), root / "logs", "csv")
    return root


def test_apeb_runs_end_to_end_from_logs_on_disk(workdir, prefect_api):
    summary = workdir / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/apeb.yaml",
                           "--summary-json", str(summary), "--quiet"], cwd=workdir,
                          env=dict(os.environ, PREFECT_API_URL=prefect_api), capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(summary.read_text())
    headline = {(r["agent"], r["judge"]): r for r in result["headline"]}
    assert headline[("apeb-oracle", "apeb.ranking")]["score"] == 100.0
    assert headline[("apeb-oracle", "apeb.ranking")]["n"] == 4  # one session x 2 query levels x 2 candidate sets
    assert ("apeb-react-json", "rubric") in headline and ("apeb-oracle", "rubric") in headline
    assert result["requests"]["agent"] and result["requests"]["judge"]

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir}/mlruns/mlflow.db")
    run = client.get_run(result["mlflow_run_id"])
    files = {a.path for a in client.list_artifacts(run.info.run_id, "analysis/apeb")}
    for name in ("table_hit_at_1.csv", "table_cells.csv", "invalid_outputs.csv", "rubric_rubric.csv",
                 "dataset_by_category.csv", "fig_hit_at_1.png"):
        assert f"analysis/apeb/{name}" in files, name
    local = client.download_artifacts(run.info.run_id, "analysis/apeb/table_hit_at_1.csv", str(workdir))
    rows = {r["system"]: r for r in csv.DictReader(open(local))}
    assert list(rows["apeb-oracle"])[1:] == ["intent / random", "intent / hard", "refined / random", "refined / hard"]
    assert all(float(v) == 100.0 for k, v in rows["apeb-oracle"].items() if k != "system")
