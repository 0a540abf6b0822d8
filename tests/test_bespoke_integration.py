"""Bespoke end to end on real parts (the embedded SmolLM2 server, Prefect, Dask, MiniLM + FAISS, MLflow):
no context, LLM-selected sessions as raw text, the gold-information setting (a selected-history profile)
and one evaluator variant of Table 3, on one query of the sample. Assertions are on what the pipeline
passed (traces), never on the small model's quality. `perseval/benchmarks/bespoke/configs/experiments/bespoke_cpu.yaml` runs every
setting and Tables 3-5 the same way; this test keeps to what fits a CI budget on two cores."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from perseval.core.instances import AgentOutput
from perseval.core.store import StageStore

from .conftest import CONFIGS, shipped_yaml

pytestmark = pytest.mark.integration

SETTINGS = ["bespoke-no-context", "bespoke-selected-raw", "bespoke-gold-information"]
EXPERIMENT = {
    "name": "bespoke-tiny", "seed": 3, "repeats": 1, "shard_size": 2, "output_root": "runs",
    "backbones": ["smollm2-tiny"], "retrievers": ["minilm"], "judges": ["judge-a"],
    "benchmarks": [
        {"name": "bespoke", "sample": 1, "agents": SETTINGS},
        {"name": "bespoke-meta", "sample": 1, "agents": ["bespoke-meta-feedback"]},
    ],
    "dask": {"n_workers": 1, "threads_per_worker": 1},
    "mlflow": {"experiment": "bespoke-tiny", "tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_root": "mlruns/art"},
}


@pytest.fixture(scope="module")
def summary(tmp_path_factory, prefect_api) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("bespoke-tiny")
    cfg = root / "configs"
    for kind in ("agents", "retrievers", "deployments"):
        (cfg / kind).mkdir(parents=True)
        for f in shipped_yaml(kind):
            data = yaml.safe_load(f.read_text())
            if data.get("kind") == "bespoke.responder":  # short answers and profiles: the run is about the wiring
                data["params"] |= {"max_tokens": 48, **({"profile_max_tokens": 64}
                                                        if data["params"].get("user_context") == "profile" else {})}
            (cfg / kind / f.name).write_text(yaml.safe_dump(data, allow_unicode=True))
    (cfg / "models").mkdir()
    model = yaml.safe_load((CONFIGS / "models" / "smollm2-135m.yaml").read_text())
    model.update(name="smollm2-tiny", sampling={"temperature": 0.0, "max_tokens": 48})
    (cfg / "models" / "smollm2-tiny.yaml").write_text(yaml.safe_dump(model))
    (cfg / "judges").mkdir()
    (cfg / "judges" / "judge-a.yaml").write_text(yaml.safe_dump(
        {"name": "judge-a", "model": "smollm2-tiny", "sampling": {"temperature": 0.0, "max_tokens": 40}}))
    (cfg / "experiments").mkdir()
    (cfg / "experiments" / "tiny.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    out = root / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/tiny.yaml",
                           "--summary-json", str(out), "--quiet"], cwd=root,
                          env=dict(os.environ, PREFECT_API_URL=prefect_api), capture_output=True, text=True,
                          timeout=3000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root, json.loads(out.read_text())


def _outputs(root: Path, summary: dict, agent: str) -> list[AgentOutput]:
    keys = {k.split("/")[0] for k in summary["run_outputs"]}
    found = []
    for key in keys:
        found += [o for o in StageStore(root / "runs", "run", key).read_records(AgentOutput) if o.agent == agent]
    return found


def test_every_setting_runs_and_is_scored(summary) -> None:
    root, s = summary
    cells = {(r["benchmark"], r["agent"]): r for r in s["headline"]}
    for agent in SETTINGS:
        row = cells["bespoke", agent]
        assert row["metric"] == "avg" and row["instances"] == 1 and row["failed_outputs"] == 0  # judged (n: scored)
    assert cells["bespoke-meta", "bespoke-meta-feedback"]["metric"] in ("feedback_accuracy", "score_error")
    assert {k for k in s["analyses"]} == {"bespoke", "bespoke-meta"}
    assert {"table4.csv", "feedback_per_response.csv", "requests_per_setting.csv",
            "table7_per_user.csv"} <= set(s["analyses"]["bespoke"])
    assert "table3.csv" in s["analyses"]["bespoke-meta"]
    client = MlflowClient(f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    names = {a.path for a in client.list_artifacts(s["mlflow_run_id"], "analysis/bespoke")}
    assert "analysis/bespoke/table4.md" in names


def test_selected_settings_pass_only_the_selected_sessions(summary) -> None:
    root, s = summary
    for agent in ("bespoke-selected-raw", "bespoke-gold-information"):  # raw text; a profile of the selection
        (out,) = _outputs(root, s, agent)
        steps = {t["step"]: t for t in out.trace}
        kept = [d["doc_id"] for d in steps["history"]["decisions"] if d["keep"]]
        history = steps["history"]["sessions"]
        assert steps["context"]["sessions"] == kept and len(steps["history"]["decisions"]) == history
    (raw,) = _outputs(root, s, "bespoke-selected-raw")
    context = next(t for t in raw.trace if t["step"] == "context")
    assert context["text"].count("--- past ") == len(context["sessions"])


def test_gold_information_setting_passes_no_search_results(summary) -> None:
    root, s = summary
    (out,) = _outputs(root, s, "bespoke-gold-information")
    search = next(t for t in out.trace if t["step"] == "search")
    assert search["backend"] == "gold" and search["results"]
    assert all(r["doc_id"].startswith("gold-") for r in search["results"])
    (corpus,) = _outputs(root, s, "bespoke-selected-raw")
    assert all(not r["doc_id"].startswith("gold-") for r in next(t for t in corpus.trace
                                                                   if t["step"] == "search")["results"])
