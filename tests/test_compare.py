"""`perseval compare`: parent runs named by id or by experiment, headline scores side by side with deltas,
written as Markdown or CSV; on a real MLflow SQLite store."""
from __future__ import annotations

import mlflow
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from flows.cli import app


def _parent(name: str, scores: dict[str, float]) -> str:
    with mlflow.start_run(run_name=name) as parent:
        for cell, value in scores.items():
            with mlflow.start_run(run_name=cell, nested=True):
                mlflow.set_tags({"perseval.cell": cell, "perseval.headline_metric": "hit_at_1"})
                mlflow.log_metric("hit_at_1", value)
        return parent.info.run_id


def test_compare_by_ids_and_experiments_with_deltas_and_files(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("cmp")
    first = _parent("before", {"apeb/a": 10.0, "apeb/b": 50.0})
    second = _parent("after", {"apeb/a": 25.0, "apeb/c": 5.0})
    runner = CliRunner()
    out = tmp_path / "table.csv"
    result = runner.invoke(app, ["compare", first[:8], second, "--tracking-uri", uri, "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert lines[0] == f"cell (headline metric),before {first[:8]},after {second[:8]},Δ {second[:8]}"
    assert "apeb/a (hit_at_1),10.0,25.0,15.0" in lines and "apeb/b (hit_at_1),50.0,," in lines
    by_experiment = runner.invoke(app, ["compare", "cmp", "--latest", "1", "--tracking-uri", uri])
    assert by_experiment.exit_code == 0 and f"after {second[:8]}" in by_experiment.output
    assert f"before {first[:8]}" not in by_experiment.output
    bad = runner.invoke(app, ["compare", "no-such-thing", "--tracking-uri", uri])
    assert bad.exit_code == 2 and "neither an MLflow experiment" in bad.output
    assert len(MlflowClient(uri).search_runs([mlflow.get_experiment_by_name("cmp").experiment_id])) == 6


def test_compare_shows_cost_beside_scores_when_asked(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("cost")
    with mlflow.start_run(run_name="priced") as parent:
        with mlflow.start_run(run_name="iba/a", nested=True):
            mlflow.set_tags({"perseval.cell": "iba/a", "perseval.headline_metric": "score"})
            mlflow.log_metrics({"score": 40.0, "tokens_in": 1200, "tokens_out": 300, "cost_usd": 0.0042})
    with mlflow.start_run(run_name="unpriced") as other:
        with mlflow.start_run(run_name="iba/a", nested=True):
            mlflow.set_tags({"perseval.cell": "iba/a", "perseval.headline_metric": "score"})
            mlflow.log_metrics({"score": 45.0, "tokens_in": 1100, "tokens_out": 280})
    first, second = parent.info.run_id, other.info.run_id
    out = tmp_path / "cost.csv"
    runner = CliRunner()
    result = runner.invoke(app, ["compare", first, second, "--cost", "--tracking-uri", uri, "--out", str(out)])
    assert result.exit_code == 0, result.output
    header, row = out.read_text().splitlines()
    assert header.split(",")[3:] == [f"Δ {second[:8]}", f"tokens_in {first[:8]}", f"tokens_in {second[:8]}",
                                     f"tokens_out {first[:8]}", f"tokens_out {second[:8]}", f"cost_usd {first[:8]}",
                                     f"cost_usd {second[:8]}"]
    assert row == "iba/a (score),40.0,45.0,5.0,1200.0,1100.0,300.0,280.0,0.0042,"
    shown = runner.invoke(app, ["compare", first, second, "--cost", "--tracking-uri", uri])
    assert "0.0042" in shown.output and "1200 " in shown.output and "40.0" in shown.output  # cents stay visible
    plain = runner.invoke(app, ["compare", first, second, "--tracking-uri", uri])
    assert "tokens_in" not in plain.output  # without --cost the table is the scores only
