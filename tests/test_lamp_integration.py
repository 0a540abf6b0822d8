"""LaMP end to end on real parts, from the hand-written sample in the official layout: `perseval validate`
(and its file/row/field line on a broken sample), then one `perseval run`, tiny: BM25 over the profiles, the
embedded llama.cpp server, Prefect + Dask, MLflow. Three tasks (a classification, the rating, a generation),
two users each; the oracle, the no-profile floor and BM25 top-3 with the swapped-history control; scored by
the rule judge only."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from perseval_flows.cli import app
from perseval.core.instances import AgentOutput
from perseval.core.store import StageStore
from perseval.experiment.load import experiment_file

from .cli_runs import cli_run, finish
from .conftest import CONFIGS, REPO

pytestmark = pytest.mark.integration
EXPERIMENT = {
    "name": "lamp-tiny", "seed": 5, "repeats": 1, "shard_size": 6, "output_root": "runs",
    "backbones": ["smollm2-135m"], "retrievers": ["bm25"], "judges": [], "controls": ["swapped-history"],
    "benchmarks": [{"name": "lamp", "source": "data/lamp", "sample": 2,
                    "params": {"tasks": ["LaMP-2", "LaMP-3", "LaMP-7"]},
                    "agents": ["lamp-oracle", "lamp-no-profile", "lamp-rag", "lamp-random-k"]}],
    "dask": {"n_workers": 1, "threads_per_worker": 1},
    "mlflow": {"experiment": "lamp-tiny", "tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_root": "mlruns/art"},
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lamp")
    for kind in ("agents", "retrievers", "deployments", "models"):
        shutil.copytree(CONFIGS / kind, root / "configs" / kind)
    (root / "configs" / "experiments").mkdir()
    (root / "configs" / "experiments" / "tiny.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    shutil.copytree(REPO / "perseval" / "benchmarks" / "lamp" / "sample", root / "data" / "lamp")
    return root


def test_validate_accepts_the_cpu_config_and_names_a_bad_row(workdir, monkeypatch):
    runner = CliRunner()
    ok = runner.invoke(app, ["validate", str(experiment_file("lamp_cpu"))])
    assert ok.exit_code == 0 and "ok:" in ok.output, ok.output
    bad = workdir / "bad"
    shutil.copytree(workdir / "data", bad / "data")
    shutil.copytree(workdir / "configs", bad / "configs")
    golds = bad / "data" / "lamp" / "LaMP_3" / "dev" / "dev_outputs.json"
    value = json.loads(golds.read_text())
    value["golds"][1]["output"] = "five"
    golds.write_text(json.dumps(value))
    monkeypatch.chdir(bad)
    result = runner.invoke(app, ["validate", "configs/experiments/tiny.yaml"])
    assert result.exit_code == 2, result.output
    assert "dev_outputs.json" in result.output and "row 2" in result.output and "field 'output'" in result.output
    assert "Traceback" not in result.output


def test_lamp_runs_end_to_end_with_the_swapped_history_control(workdir, prefect_api):
    rc, result, out = finish(cli_run(workdir, prefect_api, workdir / "runs", "lamp", experiment="tiny"), workdir, "lamp")
    assert rc == 0, out[-3000:]
    head = {r["agent"]: r for r in result["headline"]}
    assert head["lamp-oracle"]["score"] == 100.0 and head["lamp-oracle"]["n"] == 6
    rag = head["lamp-rag"]
    assert rag["n"] == 6 and rag["n_users"] == 6 and rag["failed_outputs"] == 0
    gain = rag["controls"]["personalization"]  # own - swapped history, over the instances both scored
    assert gain["reference_score"] is not None and gain["point"] == pytest.approx(gain["own"] - gain["reference_score"])
    assert "lamp-no-profile" in rag["controls"]["history"]["reference_label"]  # the history gain's reference
    # what the swapped runs really sent: each prompt's profile items are another user's of the same task.
    # random-k always shows k items; BM25 shows only items sharing a term with the query (none may)
    swapped = [o for key in {r["key"] for r in result["run_outputs"].values()}
               for o in StageStore(workdir / "runs", "run", key).read_records(AgentOutput)
               if any(step.get("step") == "control" for step in o.trace)]
    assert sorted(o.agent for o in swapped) == ["lamp-rag"] * 6 + ["lamp-random-k"] * 6
    for out in swapped:
        control = next(step for step in out.trace if step.get("step") == "control")
        shown = next(step for step in out.trace if step.get("step") == "context")["passages"]
        assert control["history_of"] != control["user"]
        assert control["history_of"].split("-user-")[0] == control["user"].split("-user-")[0]  # the same task
        assert all(p["doc_id"].startswith(control["history_of"] + "#") for p in shown)
        assert shown or out.agent == "lamp-rag"

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir}/mlruns/mlflow.db")
    run_id = result["mlflow_run_id"]
    files = {a.path for a in client.list_artifacts(run_id, "analysis/lamp")}
    assert "analysis/lamp/table_lamp.csv" in files and "analysis/lamp/lamp_ci.csv" in files, files
    local = client.download_artifacts(run_id, "analysis/lamp/table_lamp.csv", str(workdir))
    rows = {r["system"]: r for r in csv.DictReader(open(local))}
    oracle = next(v for k, v in rows.items() if k.startswith("lamp-oracle"))
    assert float(oracle["LaMP-2 Accuracy"]) == 1.0 and float(oracle["LaMP-3 MAE"]) == 0.0
    assert float(oracle["LaMP-7 ROUGE-L"]) == 1.0
