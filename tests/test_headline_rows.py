"""The record's typed cell sections, and the summary JSON rendered from them (issues 30 and 51): the probe
stage's report becomes a cell's typed probe check; the score stage's report says complete, incomplete or no
items; the summary's rows keep the keys the summary JSON has always had, with no number for a cell whose judge
does not discriminate."""
from __future__ import annotations

import json

from perseval.core.store import StageStore
from perseval.experiment.load import load_experiment
from perseval.pipeline import probes
from perseval.pipeline.plan import make_plan
from perseval.report.analyses.status import ScoreManifest
from perseval.report.build import probe_checks
from perseval.report.words import NOT_INTERPRETABLE
from perseval.report.views.probe_check import probe_lines
from perseval.report.views.summary import summary_row

from .conftest import CONFIGS
from .record_helpers import cell

SUMMARY_KEYS = ("benchmark", "agent", "backbone", "retriever", "judge", "metric", "score", "n", "unscored_items",
                "unscored_share", "invalid_outputs", "failed_outputs", "failed_judgments", "status", "ci_low",
                "ci_high", "se", "n_users", "level", "baseline", "delta_vs_baseline", "delta_ci_low", "delta_ci_high",
                "delta_p", "delta_paired", "delta_n_users", "mde", "tokens_in", "new_tokens_in", "cost_usd")


def test_a_summary_row_keeps_the_keys_the_summary_always_had():
    row = summary_row(cell("iba", "iba-rag", "j", 50.0, 10.0, 90.0, users=4))
    assert set(SUMMARY_KEYS) <= set(row) and json.loads(json.dumps(row)) == row
    assert (row["score"], row["ci_low"], row["ci_high"], row["n_users"], row["name"]) == (50.0, 10.0, 90.0, 4, "iba-rag")
    flagged = summary_row(cell("iba", "iba-rag", "j", 50.0, 10.0, 90.0, users=4, flagged=True))
    assert (flagged["score"], flagged["ci_low"], flagged["ci_high"]) == (None, None, None)  # no number
    assert flagged["uninterpretable_mean"] == 50.0 and flagged["uninterpretable_reason"] == NOT_INTERPRETABLE
    assert flagged["judge_discriminates"] is False and flagged["judge_flag"] == NOT_INTERPRETABLE


def test_the_probe_report_becomes_the_cells_typed_check(tmp_path):
    """The quickstart's plan probes its judges (judge_probes: 2); a probe report in the store, as the probe
    stage leaves it, is the check of that judge's cells."""
    plan = make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml"))
    unit = next(u for u in probes.probe_units(plan) if u.data.entry.name == "iba")
    report = {"auc": 0.5, "pass_rate.gold": 100.0, "pass_rate.bad": 100.0, "discriminates": False, "n_items": 12,
              "n.gold": 6, "n.empty": 3, "n.wrong-user": 3}
    StageStore(tmp_path, "probe", unit.key).mark_complete({"benchmark": "iba", "judge": unit.judge.name,
                                                           "report": report})
    checks = probe_checks(plan, str(tmp_path))
    check = checks[("iba", unit.judge.name)]
    assert (check.auc, check.discriminates, check.items, check.bad_items) == (0.5, False, 12, 6)
    assert check.flag == NOT_INTERPRETABLE and ("iba", "iba.slots") not in checks  # a rule judge: not probed
    flagged = cell("iba", "iba-rag", unit.judge.name, 40.0).model_copy(update={"probe": check})
    (line,) = probe_lines([flagged, cell("iba", "iba-rag", "iba.slots", 30.0)])
    assert "AUC 0.50 on 12 probe items" in line and "100% of 6 gold" in line and NOT_INTERPRETABLE in line


def test_a_score_manifest_says_complete_incomplete_or_no_items():
    assert ScoreManifest.of({"outputs": {"ok": 3}, "judgments": {"scored": 3}}).status == "complete"
    assert ScoreManifest.of({"outputs": {"ok": 3}, "judgments": {}}).status == "no items"
    m = ScoreManifest.of({"table": [], "headline_metric": "hit@1", "metrics": ["hit@1"], "outputs": {"ok": 2, "failed": 1},
                          "judgments": {"scored": 2}})
    assert (m.status, m.complete, m.headline_metric) == ("incomplete", False, "hit@1")
