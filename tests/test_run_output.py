"""The whole output of a run (headline, its note, Controls, the judge check, cost, traces) rendered from a record,
at 80, 100 and 120 columns (issues 42 and 51): no line over the width, no cut number ("…"), no word split across
lines, each cell named once and unambiguously, a flagged judge's cells with no number, and the snapshot of each
width. The record is built by the track stage's own builder from the quickstart's plan with seeded instance
scores and probe reports (no model, no MLflow): fast.

A snapshot changes only with the output: after a deliberate change, `PERSEVAL_UPDATE_SNAPSHOTS=1 pytest
tests/test_run_output.py` rewrites tests/data/snapshots/ and the diff is reviewed like code."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from perseval.core.instances import InstanceScore
from perseval.core.store import StageStore
from perseval.experiment.load import load_experiment
from perseval.metrics.aggregate import group_table
from perseval.pipeline import probes
from perseval.pipeline.plan import make_plan
from perseval.report.build import build_cells
from perseval.report.record import ExperimentRef, Traces, make_record
from perseval.report.views.controls import CONTROLS_NOTE
from perseval.report.views.headline import headline_note
from perseval.report.views.run import render_text, run_output
from perseval.report.views.text import score_text, users_text

from .conftest import CONFIGS, REPO

SNAPSHOTS = REPO / "tests" / "data" / "snapshots"
USERS = ["u0", "u0", "u1", "u1", "u2", "u2", "u3", "u3"]
FLAGGED = {"auc": 0.5, "auc_ci": [0.21, 0.79], "auc_from": "p_true", "pass_rate.good": 100.0, "pass_rate.bad": 100.0,
           "discriminates": False, "n_items": 24, "n.good": 8, "n.bad": 16}
GOOD = {"auc": 0.92, "auc_ci": [0.81, 1.0], "auc_from": "p_true", "pass_rate.good": 90.0, "pass_rate.bad": 12.0,
        "discriminates": True, "n_items": 20, "n.good": 10, "n.bad": 10}


def _scores(cell, rng) -> list[InstanceScore]:
    values = [float(v) for v in rng.choice([0.0, 50.0, 100.0], size=len(USERS))]
    unscored = cell.agent == "bespoke-raw-history"  # one instance whose items were all unreadable
    return [InstanceScore(f"i{k}", cell.agent, 0, cell.judge, 0, "G", "score",
                          None if unscored and k == 0 else v, 4, 4 if unscored and k == 0 else 0, user_id=USERS[k])
            for k, v in enumerate(values)]


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    """The quickstart's plan, each cell with 8 seeded instance scores of 4 users, IBA's LLM judge probed and
    flagged, Bespoke's probed and discriminating; built into a record as the track stage builds it."""
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    exp.experiment.statistics.resamples = 200
    plan, root = make_plan(exp), str(tmp_path_factory.mktemp("output"))
    rng = np.random.default_rng(3)
    scores = {}
    for cell in plan.cells:
        records = _scores(cell, rng)
        StageStore(root, "score", cell.key).write_records(0, records, InstanceScore)
        table = group_table(records, ["score"], None, cell.statistics)
        unscored = sum(s.value is None for s in records)
        scores[cell.key] = {"table": table.reset_index().to_dict("records"), "headline_metric": "score",
                            "metrics": ["score"], "outputs": {"ok": 8},
                            "judgments": {"scored": 32 - 4 * unscored, "unscored": 4 * unscored}}
    for unit in probes.probe_units(plan):
        report = FLAGGED if unit.data.name == "iba" else GOOD
        StageStore(root, "probe", unit.key).mark_complete({"benchmark": unit.data.name, "judge": unit.judge.name,
                                                           "report": report})
    cells = build_cells(plan, root, scores)
    ref = ExperimentRef(name="quickstart", file="configs/experiments/quickstart.yaml", settings_digest=exp.key(),
                        mlflow_experiment="perseval-quickstart")
    return make_record("0123456789abcdef", ref, cells, [], None, traces=Traces(selection="all", traced=64, outputs=64))


def _render(record, width: int, wide: bool = False) -> str:
    return render_text(run_output(record, width, wide), width)


def test_the_record_withholds_a_flagged_judges_numbers_and_counts_instances(record):
    flagged = [c for c in record.cells if c.parts.judge == "smollm2-judge" and c.parts.benchmark == "iba"]
    assert flagged and all(not c.interpretable for c in flagged)
    for c in flagged:  # no point, interval, difference or gain; the raw mean kept under its own name
        e = c.estimate
        assert (e.point, e.low, e.high, c.difference) == (None, None, None, None) and e.uninterpretable_mean is not None
        assert c.controls is not None and c.controls.personalization is None and c.controls.history is None
    # the Holm family is the interpretable comparisons only: IBA's flagged LLM-judge cells are out of it
    assert all(c.difference is None for c in record.cells if not c.interpretable)
    raw = next(c for c in record.cells if c.parts.agent == "bespoke-raw-history")
    assert (raw.status.word, raw.status.scored, raw.status.instances, raw.status.scored_share) == \
        ("partly scored", 7, 8, 87.5)  # one unscored instance of eight: never "ok"
    control = next(c for c in record.cells if c.control)
    plain = record.cell(control.plain)
    assert control.label == f"{plain.label} [swapped-history]" and record.cells.index(control) == \
        record.cells.index(plain) + 1
    assert plain.controls.personalization.reference == control.key


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_run_output_fits_its_width_with_every_cell_named_and_no_word_split(record, width):
    text = _render(record, width)
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width, text
    assert "±" not in text and "…" not in text, text
    for c in record.cells:  # control cells too, under their plain cell
        rows = [ln for ln in lines if ln.startswith(f"{c.label} ") and (c.control or not ln.startswith(f"{c.label} ["))]
        assert rows, (c.label, text)
        shown = score_text(c)
        assert shown in rows[0] and f"{users_text(c)}" in rows[0], (c.label, rows[0])
        if not c.interpretable:  # "—" where the number would be, and no number of it anywhere in its rows
            mean = c.estimate.uninterpretable_mean
            assert shown == "—" and all(f"{mean:.1f}" not in ln.split("—", 1)[0] for ln in rows)
        elif c.difference is not None and c.difference.point is not None:  # in its row, or a table of its own
            d = c.difference
            assert any(f"{d.point:+.1f} [{d.low:+.1f}," in ln for ln in rows), (c.label, text)
    words = set(text.split())  # prose wraps between words, never inside one
    for prose in (headline_note(record.cells), CONTROLS_NOTE):
        assert set(prose.split()) <= words, set(prose.split()) - words


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_run_output_snapshot(record, width):
    text = _render(record, width)
    path = SNAPSHOTS / f"run_output_{width}.txt"
    if os.environ.get("PERSEVAL_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_at_120_columns_each_benchmark_is_one_table_and_the_controls_show_the_paired_subset(record):
    text = _render(record, 120)
    lines = text.splitlines()
    headline = lines[:next(k for k, ln in enumerate(lines) if ln.startswith("[CI]:"))]
    for c in record.plain_cells():  # the whole row on one line: score, users/n, Δ, p, AUC, status
        (row,) = [ln for ln in headline if ln.startswith(f"{c.label} ") and not ln.startswith(f"{c.label} [")]
        assert score_text(c) in row and row.rstrip().endswith(text_status(c)), row
    assert "Controls, lamp: personalization gain = own - swapped" in text
    rag = next(c for c in record.cells if c.parts.agent == "lamp-rag" and c.control is None)
    g = rag.controls.personalization
    assert any(ln.startswith("lamp-rag ") and f"{g.own:.1f}" in ln and f"{g.reference_score:.1f}" in ln
               and f"{g.users}/{g.instances}" in ln for ln in lines), text
    assert any(ln.startswith("lamp-no-profile ") and "0 (no history)" in ln for ln in lines)  # by construction


def text_status(cell) -> str:
    from perseval.report.views.text import status_short

    return status_short(cell)


def test_wide_prints_every_column_and_a_narrow_terminal_still_names_every_cell(record):
    wide = _render(record, 400, wide=True)
    header = next(line for line in wide.splitlines() if "score [CI]" in line)
    for label in ("backbone", "retriever", "failed judg", "MDE", "p (Holm)", "judged"):
        assert label in header, label
    narrow = _render(record, 80)
    assert all(c.label in narrow for c in record.cells)
    assert re.search(r"^iba: ", narrow, re.M) and "Δ vs baseline iba-no-history [CI], p" in narrow  # split at 80


def test_no_controls_table_when_no_control_ran(record):
    plain = record.model_copy(update={"cells": record.plain_cells()})
    assert "Controls," not in _render(plain, 100) and "Controls," in _render(record, 100)


def test_an_se_of_zero_beside_an_interval_with_a_width_is_absent_with_its_reason():
    from perseval.metrics.uncertainty import cluster_mean, paired_difference
    from perseval.metrics.aggregate import OVERALL
    from perseval.report.analyses.comparisons import Comparison
    from perseval.report.analyses.status import NO_SPREAD, ScoreManifest, spread
    from perseval.report.build import difference_of, estimate_of
    from types import SimpleNamespace as NS

    e = cluster_mean([100.0] * 6, ["a", "a", "b", "b", "c", "c"])  # every user at 100: no variation
    assert e.se == 0 and e.ci_high > e.ci_low  # the estimate's own figures: the interval has a width
    assert spread(e.se, e.ci_low, e.ci_high) == (None, NO_SPREAD)
    assert spread(1.5, e.ci_low, e.ci_high) == (1.5, None)
    shown = estimate_of(ScoreManifest.of({"table": [{"group": OVERALL, "score": 100.0, "ci_low": e.ci_low,
                                                     "ci_high": e.ci_high, "se": 0.0, "n_users": 3}],
                                          "headline_metric": "score"}), 0.95, "instance", None)
    assert (shown.se, shown.se_reason, shown.mde, shown.mde_reason) == (None, NO_SPREAD, None, NO_SPREAD)
    d = paired_difference([100.0] * 6, [100.0] * 6, ["a", "a", "b", "b", "c", "c"])
    assert d.mde == 0 and d.ci_high > d.ci_low
    diff = difference_of(Comparison(NS(agent="base", key="k"), d, 1.0))
    assert diff.mde is None and diff.mde_reason == NO_SPREAD
