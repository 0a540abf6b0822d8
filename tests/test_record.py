"""The run record (issue 42): one typed, versioned record.json per tracked run, in the run's output folder and on
the parent MLflow run, that every view reads. Three real runs of the stand-in experiment (every stage's real
function, the LLM a stand-in on 127.0.0.1, tests/trace_runs.py): cold, the same outputs tracked again (a cached
re-run) and a changed experiment into the same MLflow store. The record's every field is checked; the headline,
`compare`, `samples --json` and the MLflow child runs agree on each cell's point, low, high and users;
`compare` orders runs oldest first and skips the cached re-run; `--between` prints each pair once."""
from __future__ import annotations

import json
import re

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from perseval_flows.cli import app
from perseval.core.instances import InstanceScore
from perseval.core.store import StageStore
from perseval.metrics.ci_tables import cluster_of
from perseval.report.record import RECORD, SCHEMA_VERSION, read_record, record_dir
from perseval.report.sink.runs import download_record
from perseval.report.views.run import render_text, run_output
from perseval.report.views.text import score_text
from tests.trace_runs import EXPERIMENT, make_run, track_run

EXP_NAME = EXPERIMENT["mlflow"]["experiment"]


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """(exp, plan, root, [cold, cached, changed parent ids], uri, changed root)."""
    work = tmp_path_factory.mktemp("record")
    exp, plan, root = make_run(work)
    parents = [track_run(exp, plan, root, work), track_run(exp, plan, root, work)]
    other = work / "changed"
    other.mkdir()
    exp2, plan2, root2 = make_run(other, {**EXPERIMENT, "seed": 8})  # another sample: other results
    parents.append(track_run(exp2, plan2, root2, work))  # the same MLflow store (base: work)
    uri = f"sqlite:///{work / 'mlruns' / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    return exp, plan, root, parents, uri, root2


def test_the_record_holds_every_field_of_the_run(three):
    exp, plan, root, parents, uri, _ = three
    folder = record_dir(root, parents[0])
    raw = json.loads((folder / RECORD).read_text())
    assert raw["schema_version"] == SCHEMA_VERSION
    record = read_record(folder)
    assert record.run_id == parents[0] and record.computed_by == parents[0]
    assert record.experiment.name == exp.experiment.name and record.experiment.file == exp.path
    assert record.experiment.settings_digest == exp.key() and record.experiment.mlflow_experiment == EXP_NAME
    plain = [c for c in plan.cells if c.run.control is None]
    assert [c.key for c in record.cells] == [c.key for c in plain]  # the headline's cells, in its order
    children = {r.data.tags["perseval.score_key"]: r for r in MlflowClient(uri).search_runs(
        [mlflow.get_experiment_by_name(EXP_NAME).experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parents[0]}'")}
    for cell, c in zip(plain, record.cells):
        assert c.name == cell.name and (c.parts.benchmark, c.parts.agent, c.parts.judge) == \
            (cell.benchmark, cell.agent, cell.judge)
        e = c.estimate
        assert e.level == exp.experiment.statistics.level and e.users and e.low <= e.point <= e.high
        assert e.se is not None or e.se_reason  # an SE, or why there is none; never 0 beside a width
        assert not (e.se == 0 and e.high > e.low) and not (e.mde == 0 and e.high > e.low)
        assert c.mlflow_run_id == children[cell.key].info.run_id and c.data_key == cell.run.data.key
        assert c.cost.tokens_in is not None and c.cost.wall_seconds is not None
        assert c.status.scored <= c.status.instances and c.label == children[cell.key].data.tags["perseval.label"]
        if cell.agent != "iba-no-history":
            assert c.difference is not None and c.difference.baseline == "iba-no-history"
        # per instance ONE user: the one the statistics cluster on (the score stage's user), a score, verdicts
        mine = record.cell_instances(cell.key)
        scores = {s.instance_id: s for s in StageStore(root, "score", cell.key).read_records(InstanceScore)}
        data = {i.instance_id: i for i in _instances(root, cell)}
        assert mine and all(i.user == cluster_of(data[i.instance_id]) for i in mine)
        assert all(i.user == scores[i.instance_id].user_id for i in mine if i.instance_id in scores)
        assert any(i.verdicts for i in mine) and all(i.trace_id for i in mine)
        scored = [i.score for i in mine if i.score is not None]
        assert sum(scored) / len(scored) == pytest.approx(e.point)
    assert record.timings == {} and record.llm_requests is None  # track_run passes no stage stats
    assert "row" not in raw["cells"][0] and set(raw["cells"][0]) >= {"status", "estimate", "probe", "controls"}


def _instances(root, cell):
    from perseval.core.instances import Instance

    return StageStore(root, "data", cell.run.data.key).read_records(Instance)


def test_a_cached_rerun_is_recorded_as_computed_by_the_run_it_repeats(three):
    _, _, root, parents, uri, root2 = three
    cold, cached = read_record(record_dir(root, parents[0])), read_record(record_dir(root, parents[1]))
    assert cached.results_digest == cold.results_digest and cached.computed_by == parents[0]
    changed = read_record(record_dir(root2, parents[2]))
    assert changed.results_digest != cold.results_digest and changed.computed_by == parents[2]
    client = MlflowClient(uri)
    logged = download_record(client, parents[1])
    assert logged == cached  # the parent run's artifact is the record the output folder holds
    assert client.get_run(parents[1]).data.tags["perseval.computed_by"] == parents[0]


def test_headline_compare_samples_and_child_runs_agree_on_every_cell(three):
    exp, plan, root, parents, uri, _ = three
    record = read_record(record_dir(root, parents[0]))
    headline = render_text(run_output(record, 120), 120)
    client = MlflowClient(uri)
    children = {r.data.tags["perseval.score_key"]: r.data.metrics for r in client.search_runs(
        [mlflow.get_experiment_by_name(EXP_NAME).experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parents[0]}'")}
    compared = CliRunner().invoke(app, ["compare", parents[0], "--tracking-uri", uri], terminal_width=200)
    assert compared.exit_code == 0, compared.output
    for c in record.cells:
        e, name = c.estimate, c.label
        text = f"{e.point:.1f} [{e.low:.1f}, {e.high:.1f}]"
        assert text == score_text(c)
        assert any(ln.startswith(f"{name} ") and text in ln and f"{e.users}/{c.status.scored}" in ln
                   for ln in headline.splitlines())
        assert any(ln.split()[:1] == [name] and f"{text} ({e.users})" in ln for ln in compared.output.splitlines()), \
            (name, compared.output)
        m = children[c.key]
        assert (m["headline"], m["ci_low"], m["ci_high"], m["n_users"]) == pytest.approx((e.point, e.low, e.high, e.users))
        got = CliRunner().invoke(app, ["samples", parents[0], c.name, "--json", "--tracking-uri", uri])
        assert got.exit_code == 0, got.output
        data = json.loads(got.output)
        assert (data["estimate"]["point"], data["estimate"]["low"], data["estimate"]["high"],
                data["estimate"]["users"]) == (e.point, e.low, e.high, e.users)
        assert len(data["instances"]) == len(record.cell_instances(c.key))


def test_compare_runs_oldest_first_and_skips_a_rerun_that_repeats_the_previous(three):
    _, _, _, parents, uri, _ = three
    out = CliRunner().invoke(app, ["compare", EXP_NAME, "--latest", "3", "--tracking-uri", uri], terminal_width=200)
    assert out.exit_code == 0, out.output
    runs_line = next(ln for ln in out.output.splitlines() if ln.startswith("runs (oldest first):"))
    assert parents[0][:8] in runs_line and parents[2][:8] in runs_line
    assert runs_line.index(parents[0][:8]) < runs_line.index(parents[2][:8])  # oldest first
    assert parents[1][:8] not in runs_line and f"skipped {parents[1][:8]}" in out.output  # the cached re-run
    every = CliRunner().invoke(app, ["compare", parents[0], parents[1], parents[2], "--tracking-uri", uri],
                               terminal_width=200)
    assert every.exit_code == 0 and parents[1][:8] in next(
        ln for ln in every.output.splitlines() if ln.startswith("runs (oldest first):"))  # named runs are never skipped


def test_between_prints_only_the_instance_tables_once_per_run_naming_it(three):
    _, plan, _, parents, uri, _ = three
    out = CliRunner().invoke(app, ["compare", parents[0], parents[2], "--between", "iba-rag", "iba-no-history",
                                   "--tracking-uri", uri], terminal_width=200)
    assert out.exit_code == 0, out.output
    judges = {c.judge for c in plan.cells}
    titles = [ln for ln in out.output.splitlines() if re.match(r"^run \S+ ", ln)]
    assert len(titles) == 2 * len(judges) and len(set(titles)) == len(titles), out.output  # each pair once per run
    assert "score [CI]" not in out.output and "Differences" not in out.output  # only the instance tables


def test_a_missing_interval_note_read_back_as_nan_is_no_note():
    """A score table read back with pandas has NaN where a cell has no interval note: the record says None
    (a NaN note stopped a real quickstart's track stage)."""
    from perseval.report.analyses.status import ScoreManifest
    from perseval.report.build import estimate_of

    def of(**overall):
        return ScoreManifest.of({"table": [{"group": "Overall", "score": 50.0, **overall}], "headline_metric": "score"})

    e = estimate_of(of(ci_low=10.0, ci_high=90.0, n_users=4, se=10.0, effective_users=3.2,
                       interval_note=float("nan")), 0.95, "instance", None)
    assert e.note is None and e.effective_users == 3.2 and (e.point, e.users, e.level) == (50.0, 4, 0.95)
    withheld = estimate_of(of(ci_low=None, ci_high=None, n_users=2, effective_users=1.1,
                              interval_note="interval withheld: 1.1 effective users"), 0.95, "instance", None)
    assert withheld.note == "interval withheld: 1.1 effective users"
