"""Error bars where a score is shown: the record's cells (interval, users, difference to the baseline with its
paired interval, Holm-corrected p and detectable difference), the printed table, MLflow metrics, and failed
judgments counted apart from unscored items."""
from __future__ import annotations


import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from perseval.benchmarks.iba.judges.checkpoint import IbaCheckpointJudge
from perseval.experiment.load import load_experiment
from perseval.metrics.aggregate import group_table
from perseval.metrics.uncertainty import cluster_mean, paired_difference
from perseval.pipeline.plan import make_plan
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.report.build import build_cells
from perseval.report.record import ExperimentRef, make_record
from perseval.report.sink.track import cell_metrics
from perseval.report.views.run import render_text, run_output
from perseval.report.views.text import delta_text, score_text
from perseval.pipeline.runner import score_outputs
from perseval.core.store import StageStore

from .conftest import CONFIGS

USERS = ["u0", "u0", "u1", "u1", "u2", "u2", "u3", "u3"]


def _cell_scores(cell, values):
    return [InstanceScore(f"i{k}", cell.agent, 0, cell.judge, 0, "G", "score", v, 1, int(v is None), user_id=USERS[k])
            for k, v in enumerate(values)]


@pytest.fixture
def quickstart(tmp_path):
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    exp.experiment.benchmarks[0].baseline = "iba-no-history"
    exp.experiment.benchmarks[1].baseline = None
    exp.experiment.benchmarks[2].baseline = None
    exp.experiment.benchmarks[3].baseline = None  # LaMP: the IBA comparisons alone make the Holm family
    exp.experiment.statistics.resamples = 400
    return make_plan(exp), str(tmp_path)


def _store(plan, root, values_of):
    scores = {}
    rng = np.random.default_rng(0)
    for cell in plan.cells:
        values = values_of.get(cell.name, list(rng.choice([0.0, 100.0], size=len(USERS))))
        records = _cell_scores(cell, values)
        StageStore(root, "score", cell.key).write_records(0, records, InstanceScore)
        table = group_table(records, ["score"], None, cell.statistics)
        scores[cell.key] = {"table": table.reset_index().to_dict("records"), "headline_metric": "score",
                            "metrics": ["score"], "outputs": {"ok": len(values)},
                            "judgments": {"scored": len(values), "failed": 2 if "rag" in cell.name else 0}}
    return scores


RAG = [100.0, 80.0, 60.0, 100.0, 40.0, 90.0, 70.0, None]
NO_HISTORY = [50.0, 70.0, 20.0, 60.0, 40.0, 30.0, 50.0, 10.0]


def test_headline_rows_carry_the_interval_and_the_paired_difference_to_the_baseline(quickstart):
    plan, root = quickstart
    judge = "smollm2-judge"
    values = {f"iba/iba-rag/smollm2-135m/minilm/{judge}": RAG, f"iba/iba-no-history/smollm2-135m/-/{judge}": NO_HISTORY}
    cells = build_cells(plan, root, _store(plan, root, values))
    by_name = {c.name: c for c in cells}
    rag = by_name[f"iba/iba-rag/smollm2-135m/minilm/{judge}"]
    base = by_name[f"iba/iba-no-history/smollm2-135m/-/{judge}"]
    est = cluster_mean(RAG, USERS)
    e = rag.estimate
    assert (e.point, e.low, e.high, e.se, e.users) == (pytest.approx(est.mean), est.ci_low, est.ci_high, est.se, 4)
    # Kish's effective users of the scored instances (2, 2, 2, 1 per user: 49 / 13) and the estimand, named
    assert e.effective_users == pytest.approx(7 ** 2 / 13) == est.effective_users
    assert e.weighting == "instance" and e.note is None
    # differences (i7 unscored in iba-rag: not a pair): 50, 10, 40, 40, 0, 60, 20 -> mean 220 / 7
    diff = rag.difference
    assert diff.point == pytest.approx(220 / 7) and diff.paired is True
    assert diff.baseline == "iba-no-history" and diff.baseline_cell == base.key and base.difference is None
    d = paired_difference(RAG, NO_HISTORY, USERS, resamples=400)
    assert (diff.low, diff.high, diff.mde) == (d.ci_low, d.ci_high, d.mde)
    # the two iba judges each compare iba-rag and the oracle with the baseline: four tests, Holm-corrected together
    compared = [c for c in cells if c.difference is not None]
    assert len(compared) == 4 and all(c.parts.benchmark == "iba" for c in compared)
    raw = [paired_difference(*[[s.value for s in StageStore(root, "score", c.key).read_records(InstanceScore)]
                               for c in (cell, base_cell)], USERS, resamples=400).p_value
           for cell, base_cell in _pairs(plan)]
    assert [c.difference.p_holm for c in compared] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    assert diff.p_holm >= d.p_value  # 4 users: at best p = 2/16 before the correction
    assert by_name["apeb/apeb-direct/smollm2-135m/-/apeb.ranking"].baseline is None
    assert delta_text(base) == "baseline" and delta_text(rag).startswith(f"+{220 / 7:.1f} [")
    assert score_text(rag) == f"{est.mean:.1f} [{est.ci_low:.1f}, {est.ci_high:.1f}]"
    metrics = cell_metrics(rag)  # the child run's, from the record's cell
    assert metrics["n_users"] == 4.0 and metrics["delta_vs_baseline"] == pytest.approx(220 / 7)
    assert metrics["effective_users"] == pytest.approx(49 / 13) and diff.effective_users == \
        pytest.approx(d.effective_users) == pytest.approx(49 / 13)
    assert "delta_p" not in cell_metrics(base) and cell_metrics(base)["ci_low"] == base.estimate.low


def _pairs(plan):
    cells = {c.name: c for c in plan.cells}
    for c in plan.cells:
        if c.benchmark == "iba" and c.agent != "iba-no-history":
            yield c, cells[f"iba/iba-no-history/smollm2-135m/-/{c.judge}"]


def test_the_printed_headline_shows_error_bars_and_failed_judgments_apart(quickstart):
    plan, root = quickstart
    cells = build_cells(plan, root, _store(plan, root, {}))
    record = make_record("r", ExperimentRef(name="q", file="q.yaml", settings_digest="d", mlflow_experiment="m"),
                         cells, [], None)
    text = render_text(run_output(record, 400, wide=True), 400)  # every column (compact: test_run_output.py)
    header = next(line for line in text.splitlines() if "score [CI]" in line)
    assert "Δ vs baseline [CI]" in header and "p (Holm)" in header and "failed judg" in header
    rag = next(line for line in text.splitlines() if "iba-rag" in line and "smollm2-judge" in line)
    assert score_text(cells[0]) in rag and "incomplete" in rag
    assert "Holm-corrected across the 4 comparison(s)" in text and "80% power" in text


def test_a_failed_judgment_is_counted_failed_not_unscored():
    inst = Instance("i1", "iba", "u1", "G", "task", {}, {"checkpoints": []})
    out = AgentOutput("i1", "a", 0, "answer")
    js = [Judgment("i1", "a", 0, "j", 0, "c1", "checkpoint", 1.0, "scored"),
          Judgment("i1", "a", 0, "j", 0, "c2", "checkpoint", None, "unscored"),
          Judgment("i1", "a", 0, "j", 0, "c3", "checkpoint", None, "failed")]
    (score,) = score_outputs([IbaCheckpointJudge()], {"i1": inst}, [out], js)
    assert (score.value, score.n_items, score.n_unscored) == (100.0, 3, 1)  # c3 failed: not also unscored
    (alone,) = score_outputs([IbaCheckpointJudge()], {"i1": inst}, [out], js[:2])
    assert (alone.value, alone.n_unscored) == (100.0, 1)
