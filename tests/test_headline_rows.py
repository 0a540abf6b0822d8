"""Typed headline rows and score manifests (issue 30): the three passes (headline_rows, the controls pass,
the probes pass) fill one HeadlineRow's fields; it reads as the mapping the summary JSON always held (same
keys: the core always, cost and probe fields only when filled, the controls pass's own names kept)."""
from __future__ import annotations

import json

import pytest

from perseval.report.rows import CORE, COST, HeadlineRow, ScoreManifest

CORE_ROW = {"benchmark": "iba", "agent": "iba-rag", "backbone": "m", "retriever": "r", "judge": "j", "metric": "score",
            "score": None, "n": 0, "unscored_items": 0, "unscored_share": None, "invalid_outputs": 0,
            "failed_outputs": 1, "failed_judgments": 0, "status": "incomplete", "ci_low": None, "ci_high": None,
            "se": None, "n_users": None, "level": 0.95, "baseline": None, "delta_vs_baseline": None,
            "delta_ci_low": None, "delta_ci_high": None, "delta_p": None, "delta_paired": None,
            "delta_n_users": None, "mde": None}


def test_a_row_keeps_the_summary_keys_and_reads_as_a_mapping():
    row = HeadlineRow.of(CORE_ROW)
    assert list(row) == list(CORE) == list(CORE_ROW) and row == CORE_ROW and json.loads(json.dumps(row)) == CORE_ROW
    assert row["score"] is None and row.score is None and row.judge_auc is None and "judge_auc" not in row
    assert (row.status, row.failed_outputs) == ("incomplete", 1)
    assert "tokens_in" not in row and row.tokens_in is None  # no cost pass: no cost keys (not zeros)
    with pytest.raises(AttributeError):
        row.nope
    with pytest.raises(TypeError, match="'n'"):
        HeadlineRow.of({**CORE_ROW, "n": "3"})
    with pytest.raises(TypeError, match="lacks"):
        HeadlineRow.of({"benchmark": "iba"})
    controlled = HeadlineRow.of({**row, "history_gain": 0.0, "controls_note": "uses no history"})  # the gains pass
    assert controlled.controls == {"history_gain": 0.0, "controls_note": "uses no history"}
    assert controlled["history_gain"] == 0.0 and list(controlled)[-2:] == ["history_gain", "controls_note"]
    costed = HeadlineRow.of({**CORE_ROW, **{k: 0 for k in COST}})
    assert set(COST) <= set(costed) and costed.tokens_in == 0
    assert json.loads(json.dumps(costed))["tokens_in"] == 0


def test_the_probe_pass_fills_typed_fields(tmp_path):
    """The quickstart's plan probes its judges (judge_probes: 2); a probe report in the store, as the probe
    stage leaves it, fills the rows of that judge."""
    from perseval.core.store import StageStore
    from perseval.pipeline.plan import make_plan
    from perseval.report import probes
    from perseval.experiment.load import load_experiment

    from .conftest import CONFIGS

    plan = make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml"))
    unit = next(u for u in probes.probe_units(plan) if u.data.entry.name == "iba")
    report = {"auc": 0.5, "pass_rate.gold": 100.0, "pass_rate.bad": 100.0, "discriminates": False, "n_items": 12,
              "n.gold": 6, "n.empty": 3, "n.wrong-user": 3}
    StageStore(tmp_path, "probe", unit.key).mark_complete({"benchmark": "iba", "judge": unit.judge.name,
                                                           "report": report})
    rows = [dict(HeadlineRow.of({**CORE_ROW, "judge": unit.judge.name})), {**CORE_ROW, "judge": "iba.slots"}]
    flagged, rule = probes.with_probe_flags(plan, str(tmp_path), rows)
    assert isinstance(flagged, HeadlineRow) and isinstance(rule, HeadlineRow)
    assert (flagged.judge_auc, flagged.judge_discriminates, flagged.judge_probe_items, flagged.judge_probe_bad) == \
        (0.5, False, 12, 6)
    assert flagged.judge_flag == probes.NOT_INTERPRETABLE and flagged["judge_flag"] == probes.NOT_INTERPRETABLE
    assert rule.judge_auc is None and "judge_auc" not in rule and "judge_flag" not in rule  # a rule judge: not probed
    (line,) = probes.discrimination_lines([flagged, rule])
    assert "AUC 0.50 on 12 probe items" in line and "100% of 6 gold" in line and probes.NOT_INTERPRETABLE in line


def test_a_score_manifest_says_complete_incomplete_or_no_items():
    assert ScoreManifest.of({"outputs": {"ok": 3}, "judgments": {"scored": 3}}).status == "complete"
    assert ScoreManifest.of({"outputs": {"ok": 3}, "judgments": {}}).status == "no items"
    m = ScoreManifest.of({"table": [], "headline_metric": "hit@1", "metrics": ["hit@1"], "outputs": {"ok": 2, "failed": 1},
                          "judgments": {"scored": 2}})
    assert (m.status, m.complete, m.headline_metric) == ("incomplete", False, "hit@1")
