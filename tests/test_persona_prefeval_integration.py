"""PersonaMem and PrefEval end to end on real parts, from their hand-written samples in the official layouts:
`perseval validate` (and its file/row/field line on a broken sample), then one `perseval run` of both
benchmarks, tiny: MiniLM + FAISS over the histories, the embedded llama.cpp server, Prefect + Dask, MLflow.
PersonaMem: 3 questions, the oracle and the long-context agent with the swapped-history control; PrefEval: one
preference, the explicit form with one inter-turn, both tasks, the oracle and the zero-shot agent (with its
swapped run) judged by the embedded model as prefeval.generation and by rule."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from perseval_flows.cli import app

from perseval.experiment.load import experiment_file

from .conftest import CONFIGS, REPO, copy_configs

DATA = REPO / "tests" / "data"
EXPERIMENT = {
    "name": "new-benchmarks-tiny", "seed": 5, "repeats": 1, "shard_size": 4, "output_root": "runs",
    "backbones": ["smollm2-135m"], "retrievers": ["minilm"], "judges": ["tiny-judge"],
    "controls": ["swapped-history"],
    "benchmarks": [
        {"name": "persona_mem", "source": "data/persona_mem", "sample": 3,
         "agents": ["persona-mem-oracle", "persona-mem-long-context"]},
        {"name": "prefeval", "source": "data/prefeval", "sample": 2,
         "params": {"forms": ["explicit"], "tasks": ["generation", "classification"], "inter_turns": [1]},
         "agents": ["prefeval-oracle", "prefeval-zero-shot"]},
    ],
    "overrides": {"agents": {"persona-mem-long-context": {"context_tokens": 1500},
                             "prefeval-zero-shot": {"max_tokens": 48, "context_tokens": 1500}}},
    "dask": {"n_workers": 1, "threads_per_worker": 1},
    "mlflow": {"experiment": "new-benchmarks-tiny", "tracking_uri": "sqlite:///mlruns/mlflow.db",
               "artifact_root": "mlruns/art"},
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("newbench")
    cfg = root / "configs"
    copy_configs(cfg, ("agents", "retrievers", "deployments", "models"))
    (cfg / "judges").mkdir()
    (cfg / "judges" / "tiny-judge.yaml").write_text(yaml.safe_dump(
        {"name": "tiny-judge", "model": "smollm2-135m", "sampling": {"temperature": 0.0, "max_tokens": 64}}))
    (cfg / "experiments").mkdir()
    (cfg / "experiments" / "tiny.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    shutil.copytree(DATA / "persona_mem", root / "data" / "persona_mem")
    shutil.copytree(DATA / "prefeval", root / "data" / "prefeval")
    return root


def test_validate_accepts_both_cpu_configs_and_names_a_bad_row(workdir, monkeypatch):
    runner = CliRunner()
    for name in ("persona_mem_cpu", "prefeval_cpu"):
        ok = runner.invoke(app, ["validate", str(experiment_file(name))])
        assert ok.exit_code == 0 and "ok:" in ok.output, ok.output
    bad = workdir / "bad"
    shutil.copytree(workdir / "data", bad / "data")
    shutil.copytree(workdir / "configs", bad / "configs")
    questions = bad / "data" / "persona_mem" / "questions_32k.csv"
    text = questions.read_text()
    assert ',(b),"[' in text
    questions.write_text(text.replace(',(b),"[', ',(z),"[', 1))  # the first question's correct answer
    monkeypatch.chdir(bad)
    result = runner.invoke(app, ["validate", "configs/experiments/tiny.yaml"])
    assert result.exit_code == 2, result.output
    assert "questions_32k.csv" in result.output and "field 'correct_answer'" in result.output
    assert "Traceback" not in result.output


def test_both_benchmarks_run_end_to_end_with_controls(workdir, prefect_api):
    summary = workdir / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/tiny.yaml",
                           "--summary-json", str(summary), "--quiet"], cwd=workdir,
                          env=dict(os.environ, PREFECT_API_URL=prefect_api), capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(summary.read_text())
    head = {(r["benchmark"], r["agent"], r["judge"]): r for r in result["headline"]}
    oracle = head[("persona_mem", "persona-mem-oracle", "persona_mem.choice")]
    assert oracle["score"] == 100.0 and oracle["n"] == 3
    assert head[("persona_mem", "persona-mem-long-context", "persona_mem.choice")]["n"] == 3
    assert head[("prefeval", "prefeval-oracle", "prefeval.classification")]["score"] == 100.0
    generation = head[("prefeval", "prefeval-zero-shot", "tiny-judge")]
    assert generation["n"] + generation["unscored_items"] >= 1  # judged, or counted as unscored: never dropped
    assert result["requests"]["agent"] and result["requests"]["judge"]

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir}/mlruns/mlflow.db")
    run_id = result["mlflow_run_id"]
    files = {a.path for a in client.list_artifacts(run_id, "analysis/persona_mem")}
    for name in ("table_accuracy_by_type.csv", "accuracy_by_distance.csv"):
        assert f"analysis/persona_mem/{name}" in files, files
    local = client.download_artifacts(run_id, "analysis/persona_mem/table_accuracy_by_type.csv", str(workdir))
    rows = {r["system"]: r for r in csv.DictReader(open(local))}
    oracle_row = next(v for k, v in rows.items() if k.startswith("persona-mem-oracle"))
    assert float(oracle_row["Overall"]) == 100.0
    pref = {a.path for a in client.list_artifacts(run_id, "analysis/prefeval")}
    assert "analysis/prefeval/table_classification_accuracy.csv" in pref, pref
    # two benchmarks in one run: the cross-benchmark table, each agent kind's score with interval and users
    across = Path(client.download_artifacts(run_id, "cross_benchmark.md", str(workdir))).read_text()
    interval = f" [{oracle['ci_low']:.1f}, {oracle['ci_high']:.1f}]" if oracle["ci_low"] is not None else ""
    oracle_cell = (f"persona-mem-oracle: 100.0{interval} "
                   f"({oracle['n_users']} users)")
    assert "| oracle " in across and oracle_cell in across and "| persona_mem " in across and "| prefeval " in across
