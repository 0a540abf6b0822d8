"""Two `prefeval` entries of one experiment, end to end (issue 47): a generation entry (the zero-shot agent with
its swapped-history run, judged by a judge whose one-token answers can never be read) and a classification
entry (the oracle and the zero-shot agent, by rule). Each view names the cells of the two entries apart
(`prefeval:gen/...`, `prefeval:cls/...`): the headline, the summary JSON's costs, the controls, `samples`,
`compare` and MLflow. The generation entry scores nothing: its cells say `unscored`, the run's last line names
the entry and it exits 5; PrefEval's generation judge is probed, so no entry is said to have nothing to probe."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from perseval_flows.cli import NO_SCORE_EXIT, app

from .conftest import CONFIGS, REPO, copy_configs

pytestmark = pytest.mark.integration

PARAMS = {"forms": ["explicit"], "inter_turns": [1]}
EXPERIMENT = {
    "name": "two-prefeval", "seed": 5, "repeats": 1, "shard_size": 4, "output_root": "runs",
    "backbones": ["smollm2-135m"], "retrievers": ["minilm"], "judges": ["tiny-judge"],
    "controls": ["swapped-history"], "judge_probes": 2,
    "benchmarks": [
        {"name": "prefeval", "label": "gen", "source": "data/prefeval", "sample": 2, "judges": ["mute-judge"],
         "params": {**PARAMS, "tasks": ["generation"]}, "agents": ["prefeval-zero-shot"]},
        {"name": "prefeval", "label": "cls", "source": "data/prefeval", "sample": 2,
         "params": {**PARAMS, "tasks": ["classification"]}, "agents": ["prefeval-oracle", "prefeval-zero-shot"]},
    ],
    "overrides": {"agents": {"prefeval-zero-shot": {"max_tokens": 24, "context_tokens": 1500}}},
    "dask": {"n_workers": 1, "threads_per_worker": 2, "in_process": True},
    "mlflow": {"experiment": "two-prefeval", "tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_root": "mlruns/art"},
}
GEN = "prefeval:gen/prefeval-zero-shot/smollm2-135m/-/mute-judge"
CLS = "prefeval:cls/prefeval-zero-shot/smollm2-135m/-/prefeval.classification"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("two-entries")
    cfg = root / "configs"
    copy_configs(cfg, ("agents", "retrievers", "deployments", "models"))
    (cfg / "judges").mkdir()
    for name, tokens in (("tiny-judge", 48), ("mute-judge", 1)):  # one token: never a readable verdict
        # the generation judge sizes its answer from its schema unless its own max_tokens says otherwise
        params = {"params": {"prefeval.generation": {"max_tokens": 1}}} if tokens == 1 else {}
        (cfg / "judges" / f"{name}.yaml").write_text(yaml.safe_dump(
            {"name": name, "model": "smollm2-135m", "sampling": {"temperature": 0.0, "max_tokens": tokens},
             **params}))
    (cfg / "experiments").mkdir()
    (cfg / "experiments" / "two.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    shutil.copytree(REPO / "tests" / "data" / "prefeval", root / "data" / "prefeval")
    return root


@pytest.fixture(scope="module")
def ran(workdir, prefect_api) -> tuple[subprocess.CompletedProcess, dict]:
    summary = workdir / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/two.yaml",
                           "--summary-json", str(summary), "--quiet"], cwd=workdir,
                          env=dict(os.environ, PREFECT_API_URL=prefect_api, COLUMNS="200"), capture_output=True,
                          text=True, timeout=1500)
    assert summary.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(summary.read_text())


def test_an_entry_with_no_score_is_unscored_named_last_and_exits_5(ran):
    proc, result = ran
    out = proc.stdout
    assert proc.returncode == NO_SCORE_EXIT, out[-3000:] + proc.stderr[-3000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith("no score: prefeval:gen ") and "prefeval:cls" not in last, last
    head = {f"{r['benchmark']}/{r['agent']}/{r['backbone']}/{r['retriever']}/{r['judge']}": r for r in result["headline"]}
    assert head[GEN]["status"] == "unscored" and head[GEN]["score"] is None and head[GEN]["scored_share"] == 0.0
    oracle = head["prefeval:cls/prefeval-oracle/-/-/prefeval.classification"]
    assert oracle["score"] == 100.0 and oracle["status"] == "complete"
    # PrefEval's generation checks are probed now (answers of known verdict from the release): an AUC line per
    # probed entry, and no "nothing to probe" line for them (tests/test_cell_identity.py covers that message)
    assert "judge_probes: prefeval" not in out and "is not probed" not in out


def test_every_view_names_the_two_entries_cells_apart(ran, workdir, monkeypatch):
    proc, result = ran
    names = [f"{r['benchmark']}/{r['agent']}/{r['backbone']}/{r['retriever']}/{r['judge']}" for r in result["headline"]]
    assert len(names) == len(set(names)) and {n.split("/")[0] for n in names} == {"prefeval:gen", "prefeval:cls"}
    costs = result["cost"]["cells"]
    assert GEN in costs and CLS in costs and f"{GEN} [swapped-history]" in costs
    assert len(costs) == len(set(costs)) >= len(names)  # every cell, a control too, has its own costs
    assert set(result["cost"]["construct"]) == {"prefeval:gen", "prefeval:cls"}
    # the controls: each plain cell's swapped score on its own row, under its own name
    zs = {n: r for n, r in zip(names, result["headline"]) if "/prefeval-zero-shot/" in n}
    assert {n.split("/")[0] for n in zs} == {"prefeval:gen", "prefeval:cls"}
    controls = zs[CLS]["controls"]  # the record's section: the gain against its swapped-history cell, or why none
    assert controls and (controls["personalization"] or controls["note"]), zs[CLS]
    assert any(r["name"].startswith("prefeval-zero-shot") and r["name"].endswith(" [swapped-history]")
               and r["control"] == "swapped-history" and r["benchmark"] == "prefeval:cls"
               for r in result["controls"])  # the control cell's own row

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir}/mlruns/mlflow.db")
    children = client.search_runs([client.get_experiment_by_name("two-prefeval").experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{result['mlflow_run_id']}'")
    run_names = [c.info.run_name for c in children]
    assert len(run_names) == len(set(run_names)) and GEN in run_names and CLS in run_names
    assert {c.data.tags["perseval.benchmark"] for c in children} == {"prefeval:gen", "prefeval:cls"}
    assert next(c for c in children if c.info.run_name == GEN).data.tags["perseval.status"] == "unscored"
    traces = client.search_traces(locations=[children[0].info.experiment_id], max_results=200)
    assert {t.info.tags.get("perseval.benchmark") for t in traces} >= {"prefeval:gen", "prefeval:cls"}

    runner = CliRunner()
    monkeypatch.chdir(workdir)
    got = runner.invoke(app, ["samples", result["mlflow_run_id"], "prefeval:cls/prefeval-zero-shot/prefeval.classification",
                              "--brief"])
    assert got.exit_code == 0, got.output
    ambiguous = runner.invoke(app, ["samples", result["mlflow_run_id"], "prefeval-zero-shot/prefeval.classification"])
    assert ambiguous.exit_code == 2 and "prefeval:gen/" in ambiguous.output and "prefeval:cls/" in ambiguous.output
    compared = runner.invoke(app, ["compare", result["mlflow_run_id"]], env={"COLUMNS": "200"})
    assert compared.exit_code == 0, compared.output
    assert "prefeval:gen" in compared.output and "prefeval:cls" in compared.output
    # a control's run is under its cell, labelled, never a second row of the cell's own name
    tables = re.split(r"\n(?=prefeval:\w+: )", compared.output)
    for table in (t for t in tables if t.startswith("prefeval:")):
        labels = [re.split(r"\s{2,}", line.strip())[0] for line in table.splitlines()
                  if line.strip().startswith("prefeval-")]
        assert len(labels) == len(set(labels)), table  # one row per cell, its control's labelled
        plain = [i for i, label in enumerate(labels) if f"{label} [swapped-history]" in labels]
        assert plain and all(labels[i + 1] == f"{labels[i]} [swapped-history]" for i in plain), table
