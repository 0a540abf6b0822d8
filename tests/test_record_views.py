"""Issue 51's Done-when: one real stand-in run of a quickstart-like experiment (every stage's real function, the
LLM a stand-in on 127.0.0.1: tests/trace_runs.py) with the swapped-history control and judge probes, tracked
once. For every cell, control cells included, the headline, the Controls table, `compare`, `compare --out`,
`samples --json`, the MLflow child run, the traces and the summary JSON carry the point, low, high, users, status
and name that record.json holds; the stand-in judge, which does not discriminate, has no number in any of them.
samples.jsonl holds the exact messages each output sent (read against the request cache); `samples` shows
prompt, answer, verdicts and a trace link, and lists the cells with no cell named; wrong names get a suggestion.
A version 1 record is read as version 2."""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from perseval.core.instances import AgentOutput
from perseval.core.store import StageStore
from perseval.llm.usage import prompt_record
from perseval.report.record import RECORD, SAMPLES, read_record, record_dir
from perseval.report.views.run import render_text, run_output
from perseval.report.views.summary import summary_cells
from perseval.report.views.text import gain_text, score_text, status_short, users_text
from perseval_flows.cli import app
from tests.trace_runs import EXPERIMENT, make_run, track_run

VIEWS = {**EXPERIMENT, "name": "views-demo", "controls": ["swapped-history"], "judge_probes": 2,
         "mlflow": {"experiment": "perseval-views-demo"}}


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """(plan, root, parent run id, store uri, record, workdir)."""
    work = tmp_path_factory.mktemp("views")
    exp, plan, root = make_run(work, VIEWS)
    parent = track_run(exp, plan, root, work)
    uri = f"sqlite:///{work / 'mlruns' / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    return plan, root, parent, uri, read_record(record_dir(root, parent)), work


def _row(lines: list[str], label: str) -> str:
    """The line a view gives the cell labelled `label` (a plain cell's, not its control's)."""
    return next(ln for ln in lines if ln.startswith(f"{label} ") and not ln.startswith(f"{label} ["))


def _scored(c) -> str:
    e = c.estimate
    return f"{e.point:.1f} [{e.low:.1f}, {e.high:.1f}]"


def test_every_view_carries_the_records_point_interval_users_status_and_name(tracked, tmp_path):
    plan, root, parent, uri, record, _ = tracked
    controls, flagged = record.control_cells(), [c for c in record.cells if not c.interpretable]
    assert controls and flagged and any(c.interpretable for c in record.cells)  # what this test is about
    assert len(record.cells) == len(plan.cells) and "row" not in json.loads(
        (record_dir(root, parent) / RECORD).read_text())["cells"][0]
    headline = render_text(run_output(record, 120), 120).splitlines()
    out = tmp_path / "compare.csv"
    compared = CliRunner().invoke(app, ["compare", parent, "--out", str(out), "--tracking-uri", uri],
                                  terminal_width=200)
    assert compared.exit_code == 0, compared.output
    frame = pd.read_csv(out).set_index("cell")
    rid = parent[:8]
    children = {r.data.tags["perseval.score_key"]: r for r in MlflowClient(uri).search_runs(
        [mlflow.get_experiment_by_name(VIEWS["mlflow"]["experiment"]).experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent}'")}
    summary = {r["key"]: r for rows in summary_cells(record).values() for r in rows}
    for c in record.cells:
        e, s = c.estimate, c.status
        row = _row(headline, c.label)  # the headline (control cells under their plain cell)
        assert users_text(c) in row and row.rstrip().endswith(status_short(c)), row
        line = _row(compared.output.splitlines(), c.label)  # compare's side-by-side table
        got = frame.loc[c.label]  # compare --out
        assert (got[f"users {rid}"], got[f"n {rid}"], got[f"status {rid}"]) == (e.users, s.scored, s.word)
        data = json.loads(CliRunner().invoke(app, ["samples", parent, c.name, "--json", "--tracking-uri", uri]).output)
        assert (data["label"], data["estimate"], data["status"]) == (c.label, e.model_dump(), s.model_dump())
        assert len(data["instances"]) == len(record.cell_instances(c.key))
        child, flat = children[c.key], summary[c.key]
        assert (child.data.tags["perseval.label"], child.data.tags["perseval.status"]) == (c.label, s.word)
        assert (flat["name"], flat["status"], flat["n_users"], flat["n"]) == (c.label, s.word, e.users, s.scored)
        if c.interpretable:
            assert _scored(c) in row and f"{_scored(c)} ({e.users})" in line, (row, line)
            assert (got[f"score {rid}"], got[f"ci_low {rid}"], got[f"ci_high {rid}"]) == \
                pytest.approx((e.point, e.low, e.high))
            m = child.data.metrics
            assert (m["headline"], m["ci_low"], m["ci_high"], m["n_users"]) == pytest.approx((e.point, e.low, e.high,
                                                                                              e.users))
            assert (flat["score"], flat["ci_low"], flat["ci_high"]) == (e.point, e.low, e.high)
        else:  # no number anywhere: "—" in the tables, nothing in compare --out, MLflow or the summary
            assert score_text(c) == "—" and "—" in row and "—" in line and re.search(r"\d+\.\d \[", row) is None
            assert got[[f"score {rid}", f"ci_low {rid}", f"ci_high {rid}"]].isna().all()
            assert not {"headline", "ci_low", "ci_high", "delta_vs_baseline", "delta_p"} & set(child.data.metrics)
            assert (flat["score"], flat["ci_low"], flat["ci_high"], flat["delta_vs_baseline"]) == (None,) * 4
            assert e.uninterpretable_mean is not None and c.difference is None
    _traces_agree(record, VIEWS["mlflow"]["experiment"])
    _controls_agree(record, headline)


def _traces_agree(record, experiment: str) -> None:
    """Each instance's trace: the record's user, status, score and the cell's label, under the cell's judge."""
    exp_id = mlflow.get_experiment_by_name(experiment).experiment_id
    for c in record.cells:
        judge = c.parts.judge
        traces = {(t.info.tags["perseval.instance_id"], int(t.info.tags["perseval.repeat"])): t.info.tags
                  for t in mlflow.search_traces(locations=[exp_id], include_spans=False, return_type="list",
                                                filter_string=f"tags.`perseval.score_key.{judge}` = '{c.key}'")}
        mine = record.cell_instances(c.key)
        assert mine and all(i.trace_id for i in mine)
        for i in mine:
            tags = traces[(i.instance_id, i.repeat)]
            assert (tags["perseval.user_id"], tags[f"perseval.status.{judge}"], tags[f"perseval.label.{judge}"]) == \
                (i.user, i.status, c.label)
            assert tags.get(f"perseval.score.{judge}") == (None if i.score is None else f"{round(i.score, 1):g}")


def _controls_agree(record, headline: list[str]) -> None:
    """The Controls tables show each gain as the record holds it: own, the reference, users/n, the gain [CI]."""
    text = "\n".join(headline)
    shown = 0
    for c in record.plain_cells():
        for gain in (c.controls.personalization, c.controls.history) if c.controls else ():
            if gain is None:
                continue
            assert any(ln.startswith(f"{c.label} ") and f"{gain.own:.1f}" in ln and f"{gain.reference_score:.1f}" in ln
                       and f"{gain.users}/{gain.instances}" in ln for ln in headline), (c.label, text)
            assert any(ln.startswith(f"{c.label} ") and gain_text(gain) in ln for ln in headline), (c.label, text)
            shown += 1
    assert shown and "Controls, iba: personalization gain = own - swapped" in text


def test_samples_jsonl_holds_the_exact_messages_each_output_sent(tracked):
    """Against the request cache: each line's messages are the ones stored beside the answer of the request key
    the output recorded, and the agent's own trace keeps a clipped copy of the same prompt."""
    plan, root, parent, _, record, _ = tracked
    lines = [json.loads(ln) for ln in (record_dir(root, parent) / SAMPLES).read_text().splitlines()]
    assert {(ln["cell_key"], ln["instance_id"], ln["repeat"]) for ln in lines} == \
        {(i.cell, i.instance_id, i.repeat) for i in record.instances}  # one line per instance and cell
    con = sqlite3.connect(Path(root) / "cache.sqlite")
    stored = {k: json.loads(r).get("messages") for k, r in con.execute("SELECT key, response FROM responses")}
    outputs = {(c.key, o.instance_id, o.repeat): o for c in plan.cells
               for o in StageStore(root, "run", c.run.key).read_records(AgentOutput)}
    sent = [ln for ln in lines if ln["requests"]]
    assert sent and all(ln["messages"] is not None for ln in sent)
    for ln in sent:
        out = outputs[(ln["cell_key"], ln["instance_id"], ln["repeat"])]
        assert [r["key"] for r in ln["requests"]] == out.requests
        assert all(r["messages"] == stored[r["key"]] for r in ln["requests"])
        traced = [e["messages"] for e in out.trace if isinstance(e, dict) and "messages" in e]
        if traced:
            assert prompt_record(ln["messages"])["messages"] == traced[-1]
        assert ln["answer"] == out.text and ln["user"] == next(
            i.user for i in record.instances if (i.cell, i.instance_id, i.repeat) ==
            (ln["cell_key"], ln["instance_id"], ln["repeat"]))
    verdicts = [v for ln in lines for v in ln["verdicts"]]
    assert verdicts and all({"verdict", "p_true", "reason", "status"} <= set(v) for v in verdicts)


def test_samples_shows_prompt_answer_verdicts_and_a_trace_link_and_lists_the_cells(tracked):
    plan, root, parent, uri, record, _ = tracked
    cell = next(c for c in record.plain_cells() if c.parts.agent == "iba-rag" and c.interpretable)
    got = CliRunner().invoke(app, ["samples", parent, cell.label, "--tracking-uri", uri], terminal_width=120)
    assert got.exit_code == 0, got.output
    text = " ".join(got.output.split())
    assert "prompt: " in got.output and "answer: " in got.output
    exp_id = mlflow.get_experiment_by_name(VIEWS["mlflow"]["experiment"]).experiment_id
    for i in record.cell_instances(cell.key):
        assert f"{i.instance_id}: http://127.0.0.1:5000/#/experiments/{exp_id}/traces?selectedEvaluationId=" \
               f"{i.trace_id}" in got.output  # the address `perseval ui` serves
        assert i.user in text
    listing = CliRunner().invoke(app, ["samples", "--tracking-uri", uri], terminal_width=120)  # the latest run
    assert listing.exit_code == 0, listing.output
    assert all(any(ln.startswith(f"{c.label} ") for ln in listing.output.splitlines()) for c in record.cells)
    typo = CliRunner().invoke(app, ["samples", parent, "iba-ragg/iba.slots", "--tracking-uri", uri])
    assert typo.exit_code == 2 and "did you mean 'iba-rag/iba.slots'" in typo.output, typo.output
    run = CliRunner().invoke(app, ["compare", "perseval-views-dmeo", "--tracking-uri", uri])
    assert run.exit_code == 2 and "did you mean 'perseval-views-demo'" in run.output, run.output


def test_a_version_1_record_is_read_as_version_2():
    """A record perseval wrote before version 2: its cells' untyped rows become typed sections, its labels are
    made, and its flagged judge's number is withheld as version 2 withholds it."""
    from .conftest import REPO

    record = read_record(REPO / "tests" / "data" / "record_v1.json")
    assert record.schema_version == 2 and [c.label for c in record.cells] == ["iba-rag/smollm2-judge",
                                                                              "iba-rag/iba.slots", "lamp-rag"]
    judged, slots, lamp = record.cells
    assert judged.estimate.point is None and judged.estimate.uninterpretable_mean == 100.0 and not judged.interpretable
    assert (slots.estimate.point, slots.status.word, slots.status.scored) == (50.0, "complete", 4)
    assert lamp.controls.personalization.point == 10.0 and lamp.controls.personalization.users == 3
    assert record.instances[0].verdicts[0].p_true is None  # absent in version 1
