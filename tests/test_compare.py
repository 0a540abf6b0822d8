"""`perseval compare`: parent runs named by id or by experiment, each cell's score [CI] (users) side by side with
the change from the first run, written as Markdown or CSV, and the differences with their error bars, all
rendered from the runs' records (each instance's score and user), on a real MLflow SQLite store."""
from __future__ import annotations

import csv

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from perseval.metrics.uncertainty import cluster_mean
from perseval.report.record import (ARTIFACT_DIR, DIGEST_TAG, CellRecord, Cost, Estimate, ExperimentRef,
                                    InstanceRecord, Parts, Status, make_record, write_record)
from perseval_flows.cli import app

USERS = ["u0", "u0", "u1", "u1", "u2", "u2", "u3", "u3", "u4", "u5", "u6", "u7"]


def _cell(name: str, values: list[float | None], data_key: str, cost: Cost | None = None) -> CellRecord:
    benchmark, agent = name.split("/")
    e = cluster_mean(values, USERS[:len(values)])
    scored = sum(v is not None for v in values)
    return CellRecord(key=f"{name}-{data_key}", name=f"{benchmark}/{agent}/m/-/j", label=agent,
                      parts=Parts(benchmark=benchmark, agent=agent, backbone="m", retriever="-", judge="j"),
                      metric="hit@1", data_key=data_key,
                      status=Status(word="complete" if scored == len(values) else "partly scored",
                                    instances=len(values), scored=scored, scored_share=100.0 * scored / len(values)),
                      estimate=Estimate(point=e.mean, low=e.ci_low, high=e.ci_high, level=0.95, users=e.n_users,
                                        se=e.se, mde=None), cost=cost or Cost())


def _parent(name: str, cells: dict[str, list[float | None]], tmp_path, data_key: str = "d1",
            costs: dict[str, Cost] | None = None) -> str:
    """A parent run holding the record of `cells` (name -> each instance's score, users USERS)."""
    with mlflow.start_run(run_name=name) as parent:
        records = [_cell(c, v, data_key, (costs or {}).get(c)) for c, v in cells.items()]
        instances = [InstanceRecord(cell=r.key, instance_id=f"i{k}", repeat=0, user=u, group="G", score=v,
                                    status="scored" if v is not None else "unscored")
                     for r, values in zip(records, cells.values()) for k, (v, u) in enumerate(zip(values, USERS))]
        record = make_record(parent.info.run_id, ExperimentRef(name="e", file="e.yaml", settings_digest="s",
                                                               mlflow_experiment="e"), records, instances, None)
        mlflow.log_artifacts(str(write_record(record, tmp_path / name)), ARTIFACT_DIR)
        mlflow.set_tag(DIGEST_TAG, record.results_digest)
        return parent.info.run_id


def test_compare_by_ids_and_experiments_with_changes_and_files(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("cmp")
    first = _parent("before", {"apeb/a": [0.0, 100.0, 0.0, 0.0], "apeb/b": [100.0, 0.0, 100.0, 0.0]}, tmp_path)
    second = _parent("after", {"apeb/a": [100.0, 100.0, 0.0, 0.0], "apeb/c": [0.0, 0.0, 0.0, 100.0]}, tmp_path)
    runner = CliRunner()
    out = tmp_path / "table.csv"
    result = runner.invoke(app, ["compare", first[:8], second, "--tracking-uri", uri, "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = {r["cell"]: r for r in csv.DictReader(out.open())}
    assert set(rows) == {"a", "b", "c"} and rows["a"]["metric"] == "hit@1"  # one name per cell and metric
    assert float(rows["a"][f"score {first[:8]}"]) == 25.0 and float(rows["a"][f"score {second[:8]}"]) == 50.0
    assert float(rows["a"][f"Δ {second[:8]}"]) == 25.0 and rows["b"][f"score {second[:8]}"] == ""
    assert rows["a"][f"users {first[:8]}"] == "2" and rows["a"][f"status {first[:8]}"] == "complete"
    line = next(ln for ln in result.output.splitlines() if ln.startswith("a "))
    assert "25.0 [" in line and "(2)" in line and "+25.0" in line and "±" not in line
    by_experiment = runner.invoke(app, ["compare", "cmp", "--latest", "1", "--tracking-uri", uri])
    assert by_experiment.exit_code == 0 and f"after {second[:8]}" in by_experiment.output
    assert f"before {first[:8]}" not in by_experiment.output
    bad = runner.invoke(app, ["compare", "no-such-thing", "--tracking-uri", uri])
    assert bad.exit_code == 2 and "neither an MLflow experiment" in bad.output and "'cmp'" in bad.output
    assert len(MlflowClient(uri).search_runs([mlflow.get_experiment_by_name("cmp").experiment_id])) == 2


def test_compare_shows_cost_beside_scores_when_asked(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("cost")
    first = _parent("priced", {"iba/a": [0.0, 100.0]}, tmp_path,
                    costs={"iba/a": Cost(tokens_in=1200, tokens_out=300, cost_usd=0.0042)})
    second = _parent("unpriced", {"iba/a": [100.0, 100.0]}, tmp_path,
                     costs={"iba/a": Cost(tokens_in=1100, tokens_out=280)})
    out = tmp_path / "cost.csv"
    runner = CliRunner()
    result = runner.invoke(app, ["compare", first, second, "--cost", "--tracking-uri", uri, "--out", str(out)])
    assert result.exit_code == 0, result.output
    (row,) = csv.DictReader(out.open())
    assert (row[f"tokens_in {first[:8]}"], row[f"tokens_in {second[:8]}"]) == ("1200", "1100")
    assert (row[f"cost_usd {first[:8]}"], row[f"cost_usd {second[:8]}"]) == ("0.0042", "")
    shown = runner.invoke(app, ["compare", first, second, "--cost", "--tracking-uri", uri], terminal_width=200)
    assert "0.0042" in shown.output and "1200 / 300" in shown.output and "50.0" in shown.output  # cents stay visible
    plain = runner.invoke(app, ["compare", first, second, "--tracking-uri", uri], terminal_width=200)
    assert "tokens" not in plain.output  # without --cost the table is the scores only


A1 = [100.0, 0.0, 100.0, 100.0, 0.0, 0.0, 100.0, 0.0, 100.0, 0.0, 100.0, 100.0]
A2 = [100.0, 100.0, 100.0, 100.0, 0.0, 100.0, 100.0, 0.0, 100.0, 100.0, 100.0, None]
BASE = [0.0, 0.0, 100.0, 0.0, 0.0, 0.0, 100.0, 0.0, 0.0, 0.0, 100.0, 0.0]


def test_compare_shows_paired_differences_with_error_bars_between_and_within_runs(tmp_path):
    from perseval.metrics.uncertainty import holm, paired_difference, unpaired_difference, users_needed

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("bars")
    first = _parent("before", {"iba/a": A1, "iba/base": BASE}, tmp_path)
    second = _parent("after", {"iba/a": A2, "iba/base": BASE}, tmp_path)
    out = tmp_path / "cmp.csv"
    result = CliRunner().invoke(app, ["compare", first, second, "--baseline", "base", "--tracking-uri", uri,
                                      "--out", str(out), "--detect", "5"])
    assert result.exit_code == 0, result.output
    rows = {(r["cell"], r["against"]): r for r in csv.DictReader(
        (tmp_path / "cmp_differences.csv").open())}
    between = rows[("iba/a", f"{first[:8]} -> {second[:8]}")]
    d = paired_difference(A2, A1, USERS)
    assert float(between["Δ"]) == pytest.approx(d.mean) and between["paired"] == "True"
    assert float(between["ci_low"]) == pytest.approx(d.ci_low) and int(between["n_users"]) == 7  # u7 is unscored after
    within = [paired_difference(a, BASE, USERS) for a in (A1, A2)]
    same = paired_difference(BASE, BASE, USERS)  # the baseline cell between runs: Δ 0, p 1
    adjusted = holm([d.p_value, same.p_value, *(w.p_value for w in within)])
    assert float(between["p (Holm)"]) == pytest.approx(adjusted[0])
    assert between["verdict"] == f"not significant at n = 7 users, MDE {d.mde:.1f}"
    assert int(between["users for Δ 5"]) == users_needed(d.se, 7, 5)
    in_first = rows[("iba/a", f"base in {first[:8]}")]
    assert float(in_first["Δ"]) == pytest.approx(within[0].mean)
    assert float(in_first["p (Holm)"]) == pytest.approx(adjusted[2])
    assert "Differences (95% user-clustered intervals" in result.output and "not significant at n = 7" in result.output
    # the side-by-side change is the paired difference itself, never another subtraction
    (table,) = [r for r in csv.DictReader(out.open()) if r["cell"] == "a"]
    assert float(table[f"Δ {second[:8]}"]) == pytest.approx(d.mean)
    # a rebuilt benchmark (another data key): never paired, and said so
    third = _parent("rebuilt", {"iba/a": A2}, tmp_path, data_key="d2")
    again = CliRunner().invoke(app, ["compare", first, third, "--tracking-uri", uri, "--out", str(out)])
    (row,) = list(csv.DictReader((tmp_path / "cmp_differences.csv").open()))
    u = unpaired_difference(A2, USERS, A1, USERS)
    assert again.exit_code == 0 and row["paired"] == "False" and row["note"] == "unpaired: different instances"
    assert float(row["Δ"]) == pytest.approx(u.mean) and float(row["ci_high"]) == pytest.approx(u.ci_high)
