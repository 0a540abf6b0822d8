"""LaMP-QA end to end on real parts, from the hand-written sample in the official layout: `perseval validate`
(and its file/row/field line on a broken sample), then one `perseval run`, tiny: BM25 over the profiles, the
embedded llama.cpp server as backbone and as the per-aspect judge, Prefect + Dask, MLflow. One category, two
askers; the no-profile floor and BM25 top-2 with the swapped-history control, and one judge probe."""
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
from perseval.benchmarks.lamp_qa.judges.aspects import question_scores
from perseval.core.instances import AgentOutput, InstanceScore, Judgment
from perseval.core.store import StageStore

from .cli_runs import cli_run, finish
from .conftest import CONFIGS, REPO

pytestmark = pytest.mark.integration
EXPERIMENT = {
    "name": "lamp-qa-tiny", "seed": 5, "repeats": 1, "shard_size": 4, "output_root": "runs",
    "backbones": ["smollm2-135m"], "retrievers": ["bm25"], "judges": ["smollm2-judge"], "judge_probes": 1,
    "controls": ["swapped-history"],
    "benchmarks": [{"name": "lamp_qa", "source": "data/lamp_qa", "sample": 2,
                    "params": {"categories": ["Society & Culture"]},
                    "agents": ["lamp-qa-no-profile", "lamp-qa-rag"]}],
    "overrides": {"agents": {"lamp-qa-rag": {"top_k": 2, "passage_chars": 300, "max_tokens": 48},
                             "lamp-qa-no-profile": {"max_tokens": 48}}},
    "dask": {"n_workers": 1, "threads_per_worker": 1},
    "mlflow": {"experiment": "lamp-qa-tiny", "tracking_uri": "sqlite:///mlruns/mlflow.db",
               "artifact_root": "mlruns/art"},
}
CATEGORY_FILE = "Society_and_Culture_test.json"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lamp_qa")
    for kind in ("agents", "retrievers", "deployments", "models", "judges"):
        shutil.copytree(CONFIGS / kind, root / "configs" / kind)
    (root / "configs" / "experiments").mkdir()
    (root / "configs" / "experiments" / "tiny.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    shutil.copytree(REPO / "perseval" / "benchmarks" / "lamp_qa" / "sample", root / "data" / "lamp_qa")
    return root


def test_validate_accepts_the_experiment_and_names_a_bad_row(workdir, monkeypatch):
    runner = CliRunner()
    monkeypatch.chdir(workdir)
    ok = runner.invoke(app, ["validate", "configs/experiments/tiny.yaml"])
    assert ok.exit_code == 0 and "ok:" in ok.output, ok.output
    bad = workdir / "bad"
    shutil.copytree(workdir / "data", bad / "data")
    shutil.copytree(workdir / "configs", bad / "configs")
    path = bad / "data" / "lamp_qa" / CATEGORY_FILE
    rows = json.loads(path.read_text())
    rows[1]["profile"] = "not a list"
    path.write_text(json.dumps(rows))
    monkeypatch.chdir(bad)
    result = runner.invoke(app, ["validate", "configs/experiments/tiny.yaml"])
    assert result.exit_code == 2, result.output
    assert CATEGORY_FILE in result.output and "row 2" in result.output and "field 'profile'" in result.output
    assert "Traceback" not in result.output


def _records(workdir: Path, stage: str, keys: set[str], cls):
    return [r for key in keys for r in StageStore(workdir / "runs", stage, key).read_records(cls)]


def test_lamp_qa_runs_end_to_end_judged_per_aspect_with_the_swapped_history_control(workdir, prefect_api):
    rc, result, out = finish(cli_run(workdir, prefect_api, workdir / "runs", "lamp_qa", experiment="tiny"),
                             workdir, "lamp_qa")
    assert rc == 0, out[-3000:]
    head = {r["agent"]: r for r in result["headline"]}
    rag = head["lamp-qa-rag"]
    assert rag["n_users"] == 2 and rag["failed_outputs"] == 0 and rag["judge"] == "smollm2-judge"
    controls = rag["controls"]  # the record's section: gains, or why there is none (a judge that does not discriminate)
    if rag["judge_discriminates"] is False:
        assert rag["score"] is None and controls["personalization"] is None and controls["history"] is None
    else:
        assert controls["history"]["reference_label"] == "lamp-qa-no-profile"
        gain = controls["personalization"]
        if gain is not None and gain["point"] is not None:
            assert gain["point"] == pytest.approx(gain["own"] - gain["reference_score"])
    assert rag["judge_probe_items"] and rag["judge_auc_from"] == "verdict"
    (swapped,) = [r for r in result["controls"] if r["agent"] == "lamp-qa-rag"]  # the control cell's own row
    assert swapped["name"] == "lamp-qa-rag [swapped-history]" and swapped["control"] == "swapped-history"

    # what the swapped runs really sent: each prompt's posts are another asker's of the same category
    outputs = _records(workdir, "run", {r["key"] for r in result["run_outputs"].values()}, AgentOutput)
    swapped = [o for o in outputs if any(step.get("step") == "control" for step in o.trace)]
    assert sorted(o.agent for o in swapped) == ["lamp-qa-rag"] * 2
    for o in swapped:
        control = next(step for step in o.trace if step.get("step") == "control")
        shown = next(step for step in o.trace if step.get("step") == "context")["passages"]
        assert control["history_of"] != control["user"] and control["history_of"].startswith("Society_and_Culture-")
        assert all(p["doc_id"].startswith(control["history_of"] + "#") for p in shown)

    # the judge: one judgment per rubric aspect (3 per question), and each question's score is the paper's
    # sum over twice the aspects where every aspect was scored, else unscored
    root = workdir / "runs"
    groups: dict[tuple, list[list[Judgment]]] = {}  # (question, agent, repeat) -> its judgments, per judge unit
    for key in {p.parent.name for p in (root / "judge").glob("*/part-*.parquet")}:
        mine: dict[tuple, list[Judgment]] = {}
        for j in _records(workdir, "judge", {key}, Judgment):
            mine.setdefault((j.instance_id, j.agent, j.repeat), []).append(j)
        for k, js in mine.items():
            groups.setdefault(k, []).append(js)
    judged = [js for g in groups.values() for js in g]
    assert len(judged) == 6 and all(sorted(j.item_id for j in js) == ["aspect-1", "aspect-2", "aspect-3"]
                                    for js in judged)

    def paper(js: list[Judgment]) -> float | None:
        return question_scores([round(2 * j.score) for j in js])["score"] if all(
            j.status == "scored" for j in js) else None

    score_keys = {p.parent.name for p in (root / "score").glob("*/_manifest.json")}
    scores = [s for s in _records(workdir, "score", score_keys, InstanceScore) if s.metric == "score"]
    assert len(scores) == 6
    for s in scores:  # the plain run's or the swapped run's judgments of this question and agent
        assert any(s.value == pytest.approx(paper(js)) if paper(js) is not None else s.value is None
                   for js in groups[(s.instance_id, s.agent, s.repeat)])

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir}/mlruns/mlflow.db")
    files = {a.path for a in client.list_artifacts(result["mlflow_run_id"], "analysis/lamp_qa")}
    if any(s.value is not None for s in scores):
        assert "analysis/lamp_qa/table_lamp_qa.csv" in files and "analysis/lamp_qa/lamp_qa_ci.csv" in files, files
        local = client.download_artifacts(result["mlflow_run_id"], "analysis/lamp_qa/table_lamp_qa.csv", str(workdir))
        rows = list(csv.DictReader(open(local)))
        assert {r["system"].split(" / ")[0] for r in rows} <= {"lamp-qa-rag", "lamp-qa-no-profile"}
        assert all(0.0 <= float(r["Society & Culture"]) <= 1.0 for r in rows if r["Society & Culture"])
