"""`perseval compare`: parent runs named by id or by experiment, headline scores side by side with deltas,
written as Markdown or CSV; on a real MLflow SQLite store."""
from __future__ import annotations

import csv

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from perseval_flows.cli import app


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


USERS = ["u0", "u0", "u1", "u1", "u2", "u2", "u3", "u3", "u4", "u5", "u6", "u7"]


def _scored_parent(name: str, cells: dict[str, list[float | None]], tmp_path, data_key: str = "d1") -> str:
    """A parent run whose child runs log their instance scores (with users) as the score stage's Parquet."""
    from perseval.core.instances import InstanceScore
    from perseval.core.store import StageStore

    with mlflow.start_run(run_name=name) as parent:
        for cell, values in cells.items():
            benchmark, agent = cell.split("/")[:2]
            with mlflow.start_run(run_name=cell, nested=True):
                mlflow.set_tags({"perseval.cell": cell, "perseval.headline_metric": "score",
                                 "perseval.benchmark": benchmark, "perseval.agent": agent,
                                 "perseval.backbone": "m", "perseval.retriever": "-", "perseval.judge": "j",
                                 "perseval.data_key": data_key})
                mlflow.log_metric("score", sum(v for v in values if v is not None) / sum(v is not None for v in values))
                store = StageStore(tmp_path / name, "score", cell.replace("/", "_"))
                store.write_records(0, [InstanceScore(f"i{k}", agent, 0, "j", 0, "G", "score", v, 1, 0, user_id=u)
                                        for k, (v, u) in enumerate(zip(values, USERS))], InstanceScore)
                mlflow.log_artifact(str(store.part_path(0)), "parquet/score")
        return parent.info.run_id


A1 = [100.0, 0.0, 100.0, 100.0, 0.0, 0.0, 100.0, 0.0, 100.0, 0.0, 100.0, 100.0]
A2 = [100.0, 100.0, 100.0, 100.0, 0.0, 100.0, 100.0, 0.0, 100.0, 100.0, 100.0, None]
BASE = [0.0, 0.0, 100.0, 0.0, 0.0, 0.0, 100.0, 0.0, 0.0, 0.0, 100.0, 0.0]


def test_compare_shows_paired_differences_with_error_bars_between_and_within_runs(tmp_path):
    from perseval.metrics.uncertainty import holm, paired_difference, unpaired_difference, users_needed

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("bars")
    first = _scored_parent("before", {"iba/a": A1, "iba/base": BASE}, tmp_path)
    second = _scored_parent("after", {"iba/a": A2, "iba/base": BASE}, tmp_path)
    out = tmp_path / "cmp.csv"
    result = CliRunner().invoke(app, ["compare", first, second, "--baseline", "base", "--tracking-uri", uri,
                                      "--out", str(out), "--detect", "5"])
    assert result.exit_code == 0, result.output
    rows = {(r["cell"], r["against"]): r for r in csv.DictReader(
        (tmp_path / "cmp_differences.csv").open())}
    between = rows[("iba/a (score)", f"{first[:8]} -> {second[:8]}")]
    d = paired_difference(A2, A1, USERS)
    assert float(between["Δ"]) == pytest.approx(d.mean) and between["paired"] == "True"
    assert float(between["ci_low"]) == pytest.approx(d.ci_low) and int(between["n_users"]) == 7  # u7 is unscored after
    within = [paired_difference(a, BASE, USERS) for a in (A1, A2)]
    same = paired_difference(BASE, BASE, USERS)  # the baseline cell between runs: Δ 0, p 1
    adjusted = holm([d.p_value, same.p_value, *(w.p_value for w in within)])
    assert float(between["p (Holm)"]) == pytest.approx(adjusted[0])
    assert between["verdict"] == f"not significant at n = 7 users, MDE {d.mde:.1f}"
    assert int(between["users for Δ 5"]) == users_needed(d.se, 7, 5)
    in_first = rows[("iba/a (score)", f"iba/base in {first[:8]}")]
    assert float(in_first["Δ"]) == pytest.approx(within[0].mean)
    assert float(in_first["p (Holm)"]) == pytest.approx(adjusted[2])
    assert "Differences (95% user-clustered intervals" in result.output and "not significant at n = 7" in result.output
    # a rebuilt benchmark (another data key): never paired, and said so
    third = _scored_parent("rebuilt", {"iba/a": A2}, tmp_path, data_key="d2")
    again = CliRunner().invoke(app, ["compare", first, third, "--tracking-uri", uri, "--out", str(out)])
    (row,) = list(csv.DictReader((tmp_path / "cmp_differences.csv").open()))
    u = unpaired_difference(A2, USERS, A1, USERS)
    assert again.exit_code == 0 and row["paired"] == "False" and row["note"] == "unpaired: different instances"
    assert float(row["Δ"]) == pytest.approx(u.mean) and float(row["ci_high"]) == pytest.approx(u.ci_high)
