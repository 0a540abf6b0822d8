"""The headline as a terminal shows it (issue 32): at 100 columns every cell of the quickstart's plan is named
unambiguously (iba-rag vs iba-no-history vs iba-oracle, and which judge) beside its score [CI], users/n, the
difference to the baseline with its p, the judge's AUC and its status; the controls table only when controls
ran; every column with --wide. Issue 42: the snapshot at 80, 100 and 120 columns (no line over the width, no
row wrapped at 100, never a "±"), SE and MDE never 0 beside an interval with a width."""
from __future__ import annotations

import numpy as np
import pytest
from rich.console import Console

import perseval_flows.cli as cli
from perseval.metrics.aggregate import group_table
from perseval.pipeline.plan import make_plan
from perseval.core.instances import InstanceScore
from perseval.core.store import StageStore
from perseval.report.headline import headline_rows
from perseval.report.tables import score_text
from perseval.report.tables import headline_tables, short_names
from perseval.experiment.load import load_experiment

from .conftest import CONFIGS

USERS = ["u0", "u0", "u1", "u1", "u2", "u2", "u3", "u3"]


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """The quickstart's plan with seeded instance scores per cell, as the headline rows the run prints."""
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    exp.experiment.statistics.resamples = 200
    plan, root = make_plan(exp), str(tmp_path_factory.mktemp("headline"))
    rng = np.random.default_rng(3)
    scores = {}
    for cell in plan.cells:
        values = [float(v) for v in rng.choice([0.0, 50.0, 100.0], size=len(USERS))]
        records = [InstanceScore(f"i{k}", cell.agent, 0, cell.judge, 0, "G", "score", v, 1, 0, user_id=USERS[k])
                   for k, v in enumerate(values)]
        StageStore(root, "score", cell.key).write_records(0, records, InstanceScore)
        table = group_table(records, ["score"], None, cell.statistics)
        scores[cell.key] = {"table": table.reset_index().to_dict("records"), "headline_metric": "score",
                            "metrics": ["score"], "outputs": {"ok": 8}, "judgments": {"scored": 8}}
    return headline_rows(plan, scores, root=root)


def _render(monkeypatch, rows, width: int, wide: bool = False) -> str:
    console = Console(width=width, record=True)
    monkeypatch.setattr(cli, "console", console)
    cli._print_headline(rows, wide)
    return console.export_text()


def test_short_names_use_the_agent_alone_when_it_is_unique_within_its_benchmark():
    idents = [("iba", "iba-rag", "m", "minilm", "j"), ("iba", "iba-no-history", "m", "-", "j"),
              ("apeb", "apeb-direct", "m", "-", "apeb.ranking"), ("apeb", "apeb-oracle", "-", "-", "apeb.ranking")]
    assert short_names(idents) == ["iba-rag", "iba-no-history", "apeb-direct", "apeb-oracle"]
    two_judges = [("iba", "iba-rag", "m", "r", "j1"), ("iba", "iba-rag", "m", "r", "j2"), ("iba", "iba-oracle", "-", "-", "j1")]
    assert short_names(two_judges) == ["iba-rag/j1", "iba-rag/j2", "iba-oracle/j1"]
    backbones = [("iba", "iba-rag", "a", "r", "j"), ("iba", "iba-rag", "b", "r", "j")]
    assert short_names(backbones) == ["iba-rag/a", "iba-rag/b"]


def test_at_100_columns_every_cell_shows_its_agent_judge_and_score(monkeypatch, rows):
    text = _render(monkeypatch, rows, 100)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    names = short_names([tuple(r[k] for k in ("benchmark", "agent", "backbone", "retriever", "judge")) for r in rows])
    assert len(set(zip([r["benchmark"] for r in rows], names))) == len(rows)  # unambiguous within a benchmark
    for r, name in zip(rows, names):
        line = next((ln for ln in lines if ln.startswith(f"{name} ")), None)
        assert line is not None, (name, text)
        assert score_text(r) in line and f"{r['n_users']}/{r['n']}" in line, (name, line)
        assert "…" not in line, line  # nothing cut
    iba = {n for r, n in zip(rows, names) if r["benchmark"] == "iba"}
    assert {"iba-rag/smollm2-judge", "iba-no-history/smollm2-judge", "iba-oracle/smollm2-judge"} <= iba
    rag = next(ln for ln in lines if ln.startswith("iba-rag/smollm2-judge "))
    row = next(r for r in rows if r["agent"] == "iba-rag" and r["judge"] == "smollm2-judge")
    assert f"{row['delta_vs_baseline']:+.1f} [" in rag and f"{row['delta_p']:.2f}" in rag
    assert "baseline" in next(ln for ln in lines if ln.startswith("iba-no-history/smollm2-judge "))
    # no control ran: no controls table (every swapped cell would read "-"); the cost of the cells in one line
    assert "Controls:" not in text and "failed judg" not in text


def test_wide_prints_every_column_and_a_narrow_terminal_still_names_every_cell(monkeypatch, rows):
    wide = _render(monkeypatch, rows, 400, wide=True)
    header = next(line for line in wide.splitlines() if "score [CI]" in line)
    for label in ("backbone", "retriever", "failed judg", "MDE", "p (Holm)"):
        assert label in header, label
    narrow = _render(monkeypatch, rows, 80)
    for r in rows:
        assert r["agent"] in narrow  # the cell column never folds; the others wrap first


def test_the_controls_table_shows_when_a_control_ran(rows):
    ran = [dict(r, swapped_score=40.0) if r["agent"] == "iba-rag" else r for r in rows]
    from perseval.report.tables import controls_table

    assert controls_table(rows) is None and controls_table(ran) is not None
    assert [t.columns[0].header for t in headline_tables(rows)] == ["cell"] * 4  # one table per benchmark


def _probed(rows):
    """The quickstart's LLM judge probed and found not to discriminate (as the embedded 135M judge is)."""
    return [r.filled(judge_auc=0.5, judge_pass_rate_gold=100.0, judge_pass_rate_bad=100.0, judge_discriminates=False,
                     judge_flag="judge does not discriminate", judge_probe_items=24, judge_probe_gold=8,
                     judge_probe_bad=16) if r["judge"] == "smollm2-judge" else r for r in rows]


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_headline_snapshot_fits_its_width_with_intervals_as_two_ends(monkeypatch, rows, width):
    rows = _probed(rows)
    text = _render(monkeypatch, rows, width)
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width, text
    assert "±" not in text and "…" not in text, text
    names = short_names([tuple(r[k] for k in ("benchmark", "agent", "backbone", "retriever", "judge")) for r in rows])
    for r, name in zip(rows, names):
        # each cell's row: its name, score and both ends of its interval on one line, never cut
        row_lines = [ln for ln in lines if ln.startswith(f"{name} ")]
        # a judge that does not discriminate: "—" in place of its score, its AUC in the same row
        shown = "—" if r.get("judge_discriminates") is False else \
            f"{r['score']:.1f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}]"
        assert row_lines and shown in row_lines[0], (name, text)
        if width >= 100:  # one table per benchmark: the whole row on one line, the judge's AUC in it
            (line,) = row_lines
            assert f"{r['n_users']}/{r['n']}" in line and line.rstrip().endswith("ok"), line
            if r.get("delta_vs_baseline") is not None:
                assert f"{r['delta_vs_baseline']:+.1f} [{r['delta_ci_low']:+.1f}, {r['delta_ci_high']:+.1f}]" in line
            assert ("0.50 ✗" in line) == (r["judge"] == "smollm2-judge"), line
        elif r.get("delta_vs_baseline") is not None:  # in the row, or in a table of the differences of its own
            assert any(f"{r['delta_vs_baseline']:+.1f} [{r['delta_ci_low']:+.1f}," in ln for ln in row_lines), text
    # the footnote explains what is shown: the status word used, the AUC, no MDE (that column is --wide's)
    flowing = " ".join(text.split())  # the footnote wraps at the width
    assert "ok = complete" in flowing and "AUC: of the cell's judge" in flowing and "MDE" not in flowing
    assert "incompl =" not in flowing  # no incomplete cell shown: its word is not explained


def test_an_se_of_zero_beside_an_interval_with_a_width_is_absent_with_its_reason():
    from perseval.report.rows import NO_SPREAD, spread
    from perseval.metrics.uncertainty import cluster_mean, paired_difference
    from perseval.report.comparisons import Comparison, comparison_fields

    e = cluster_mean([100.0] * 6, ["a", "a", "b", "b", "c", "c"])  # every user at 100: no variation
    assert e.se == 0 and e.ci_high > e.ci_low  # the estimate's own figures: the interval has a width
    assert spread(e.se, e.ci_low, e.ci_high) == (None, NO_SPREAD)
    assert spread(1.5, e.ci_low, e.ci_high) == (1.5, None)
    d = paired_difference([100.0] * 6, [100.0] * 6, ["a", "a", "b", "b", "c", "c"])
    assert d.mde == 0 and d.ci_high > d.ci_low
    fields = comparison_fields(Comparison(None, d, 1.0), "base")
    assert fields["mde"] is None and fields["mde_reason"] == NO_SPREAD
