"""LongLaMP end to end on real parts, from the hand-written sample in the official layout: `perseval validate`
(and its file/row/field line on a broken sample), then one `perseval run`, tiny: BM25 over the profiles, the
embedded llama.cpp server, Prefect + Dask, MLflow. The three tasks, two users each; the oracle, the no-profile
floor, BM25 top-2 and two random items with the swapped-history control; scored by the rule judge only, with
short answers (32 tokens)."""
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
from .conftest import REPO, copy_configs

pytestmark = pytest.mark.integration
SHORT = {"top_k": 2, "passage_chars": 300, "max_tokens": 32}
EXPERIMENT = {
    "name": "longlamp-tiny", "seed": 5, "repeats": 1, "shard_size": 6, "output_root": "runs",
    "backbones": ["smollm2-135m"], "retrievers": ["bm25"], "judges": [], "controls": ["swapped-history"],
    "benchmarks": [{"name": "longlamp", "source": "data/longlamp", "sample": 2,
                    "agents": ["longlamp-oracle", "longlamp-no-profile", "longlamp-rag", "longlamp-random-k"]}],
    "overrides": {"agents": {"longlamp-rag": SHORT, "longlamp-random-k": SHORT,
                             "longlamp-no-profile": {"max_tokens": 32}}},
    "dask": {"n_workers": 1, "threads_per_worker": 1},
    "mlflow": {"experiment": "longlamp-tiny", "tracking_uri": "sqlite:///mlruns/mlflow.db",
               "artifact_root": "mlruns/art"},
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("longlamp")
    experiments = copy_configs(root / "configs", ("agents", "retrievers", "deployments", "models")) / "experiments"
    experiments.mkdir()
    (experiments / "tiny.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    shutil.copytree(REPO / "perseval" / "benchmarks" / "longlamp" / "sample", root / "data" / "longlamp")
    return root


def test_validate_accepts_the_cpu_config_and_names_a_bad_row(workdir, monkeypatch):
    runner = CliRunner()
    ok = runner.invoke(app, ["validate", str(experiment_file("longlamp_cpu"))])
    assert ok.exit_code == 0 and "ok:" in ok.output, ok.output
    bad = workdir / "bad"
    shutil.copytree(workdir / "data", bad / "data")
    shutil.copytree(workdir / "configs", bad / "configs")
    rows = bad / "data" / "longlamp" / "product_review_user" / "val.json"
    lines = [json.loads(line) for line in rows.read_text().splitlines()]
    lines[1]["profile"][0]["reviewText"] = ""
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    monkeypatch.chdir(bad)
    result = runner.invoke(app, ["validate", "configs/experiments/tiny.yaml"])
    assert result.exit_code == 2, result.output
    assert "val.json" in result.output and "row 2" in result.output and "profile[0].reviewText" in result.output
    assert "Traceback" not in result.output


def test_longlamp_runs_end_to_end_with_the_swapped_history_control(workdir, prefect_api):
    rc, result, out = finish(cli_run(workdir, prefect_api, workdir / "runs", "longlamp", experiment="tiny"), workdir,
                             "longlamp")
    assert rc == 0, out[-3000:]
    head = {r["agent"]: r for r in result["headline"]}
    assert head["longlamp-oracle"]["score"] == 100.0 and head["longlamp-oracle"]["n"] == 6
    rag = head["longlamp-rag"]
    assert rag["n"] == 6 and rag["n_users"] == 6 and rag["failed_outputs"] == 0
    gain = rag["controls"]["personalization"]  # own - swapped history, over the instances both scored
    assert gain["reference_score"] is not None and gain["point"] == pytest.approx(gain["own"] - gain["reference_score"])
    # what the swapped runs really sent: random-k's two items are another user's of the same task
    outputs = [o for key in {r["key"] for r in result["run_outputs"].values()}
               for o in StageStore(workdir / "runs", "run", key).read_records(AgentOutput)]
    swapped = [o for o in outputs if any(step.get("step") == "control" for step in o.trace)]
    assert sorted(o.agent for o in swapped) == ["longlamp-rag"] * 6 + ["longlamp-random-k"] * 6
    for o in swapped:
        control = next(step for step in o.trace if step.get("step") == "control")
        shown = next(step for step in o.trace if step.get("step") == "context")["passages"]
        assert control["history_of"] != control["user"]
        assert control["history_of"].split("-")[0] == control["user"].split("-")[0]  # the same task
        assert all(p["doc_id"].startswith(control["history_of"] + "#") for p in shown)
        assert len(shown) == 2 or o.agent == "longlamp-rag"  # BM25 shows only items sharing a query term

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir}/mlruns/mlflow.db")
    run_id = result["mlflow_run_id"]
    files = {a.path for a in client.list_artifacts(run_id, "analysis/longlamp")}
    assert {"analysis/longlamp/table_longlamp.csv", "analysis/longlamp/longlamp_ci.csv"} <= files, files
    local = client.download_artifacts(run_id, "analysis/longlamp/table_longlamp.csv", str(workdir))
    rows = {r["system"]: r for r in csv.DictReader(open(local))}
    oracle = next(v for k, v in rows.items() if k.startswith("longlamp-oracle"))
    assert float(oracle["Abstract Generation ROUGE-1"]) == 1.0 and float(oracle["Topic Writing ROUGE-L"]) == 1.0
    rag_row = next(v for k, v in rows.items() if k.startswith("longlamp-rag"))
    assert 0.0 <= float(rag_row["Review Writing ROUGE-L"]) < 1.0
