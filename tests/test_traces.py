"""Every instance of a cell as an MLflow trace: from real stage records (tests/trace_runs.py: the real stage
functions on an OpenAI-compatible stand-in), through `report.track`, read back with `mlflow.search_traces`.
Checked against the Parquet records themselves: spans (retrievals with gold evidence, LLM calls with tokens
and cache, answer extraction), assessments (value, rationale, unscored with its raw text), tags that filter,
a second track that writes no trace, the selection option, `perseval compare --between`, and the parent
run's name, duration and headline metrics."""
from __future__ import annotations

import json
import re
from pathlib import Path
import time
from collections import Counter

import mlflow
import psutil
import pytest
from mlflow.entities import SpanType
from mlflow.tracing.constant import SpanAttributeKey
from mlflow.tracking import MlflowClient
from pydantic import ValidationError
from typer.testing import CliRunner

from perseval_flows.cli import app
from perseval.experiment.config import MLflowSettings
from perseval.experiment.load import load_experiment
from perseval.pipeline.plan import make_plan
from perseval.core.instances import AgentOutput, Document, Instance, InstanceScore, Judgment
from perseval.core.store import StageStore
from perseval.metrics.ci_tables import cluster_of
from perseval.report.sink.traces import AUTO_LIMIT, AUTO_PER_CELL, Outcome, resolve_selection, select, write_trace
from tests.trace_runs import EXPERIMENT, UNREADABLE, make_run, track_run, write_configs

EXP_NAME = EXPERIMENT["mlflow"]["experiment"]


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """The stand-in run tracked twice: (experiment, plan, root, workdir, [first parent id, second], store uri,
    seconds of each track)."""
    work = tmp_path_factory.mktemp("traces")
    exp, plan, root = make_run(work)
    seconds, parents = [], []
    for _ in range(2):
        t0 = time.monotonic()
        parents.append(track_run(exp, plan, root, work))
        seconds.append(time.monotonic() - t0)
    uri = f"sqlite:///{work / 'mlruns' / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    return exp, plan, root, work, parents, uri, seconds


def _experiment_id() -> str:
    return mlflow.get_experiment_by_name(EXP_NAME).experiment_id


def _children(parent: str) -> dict[str, object]:
    runs = MlflowClient().search_runs([_experiment_id()], filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    return {r.data.tags["perseval.score_key"]: r for r in runs}


def _of(cell) -> str:
    """The filter of a cell's traces: its agent run's outputs under its judge's score key."""
    return f"tags.`perseval.score_key.{cell.judge}` = '{cell.key}'"


def _traces(filter_string: str, **kw) -> list:
    return mlflow.search_traces(locations=[_experiment_id()], filter_string=filter_string, return_type="list", **kw)


def test_every_output_of_every_cell_is_one_trace_linked_to_its_cell_run(tracked):
    exp, plan, root, _, parents, _, _ = tracked
    children = _children(parents[0])
    for cell in plan.cells:
        outputs = StageStore(root, "run", cell.run.key).read_records(AgentOutput)
        traces = mlflow.search_traces(locations=[_experiment_id()], run_id=children[cell.key].info.run_id,
                                      return_type="list", include_spans=False)
        assert sorted((t.info.tags["perseval.instance_id"], t.info.tags["perseval.repeat"]) for t in traces) == \
            sorted((o.instance_id, str(o.repeat)) for o in outputs), cell.name
        assert {t.info.tags[f"perseval.score_key.{cell.judge}"] for t in traces} == {cell.key}


def test_one_trace_per_agent_output_holds_every_judges_score_key_status_and_verdicts(tracked):
    exp, plan, root, *_ = tracked
    judges = [c for c in plan.cells if c.agent == "iba-rag" and c.run.control is None]
    assert len(judges) == 2 and len({c.run.key for c in judges}) == 1  # two judges of one agent run
    outputs = StageStore(root, "run", judges[0].run.key).read_records(AgentOutput)
    traces = _traces(f"tags.`perseval.run_key` = '{judges[0].run.key}'", include_spans=False)
    assert sorted(t.info.tags["perseval.instance_id"] for t in traces) == sorted(o.instance_id for o in outputs)
    for t in traces:
        tags = t.info.tags
        assert {tags[f"perseval.score_key.{c.judge}"] for c in judges} == {c.key for c in judges}
        judged = [c.judge for c in judges if tags[f"perseval.status.{c.judge}"] != "not_judged"]
        assert tags["perseval.judge"] == ",".join(judged or [judges[0].judge])
        verdicts_by = {(a.metadata or {}).get("judge") for a in t.info.assessments} - {None}
        assert verdicts_by == set(judged)  # every judge's verdicts on this one trace, and only theirs


def test_tags_filter_by_agent_user_status_and_score(tracked):
    exp, plan, root, *_ = tracked
    rag = next(c for c in plan.cells if c.agent == "iba-rag" and c.judge == "stub-judge")
    by_agent = _traces("tags.`perseval.agent` = 'iba-rag' AND tags.`perseval.judge` = 'stub-judge'")
    assert {t.info.tags["perseval.score_key.stub-judge"] for t in by_agent} == {rag.key}
    instances = {i.instance_id: i for i in StageStore(root, "data", rag.run.data.key).read_records(Instance)}
    for t in by_agent:  # the user the statistics cluster on, as `samples` and the run record name it (issue 42)
        assert t.info.tags["perseval.user_id"] == cluster_of(instances[t.info.tags["perseval.instance_id"]])
    # the instance scores the score stage wrote, as the score tag; instances nobody scored carry none
    values = {s.instance_id: s.value for s in StageStore(root, "score", rag.key).read_records(InstanceScore)
              if s.metric == "score" and s.value is not None}
    zero = {i for i, v in values.items() if v == 0}
    found = _traces(f"{_of(rag)} AND tags.`perseval.score.stub-judge` = '0'")
    assert {t.info.tags["perseval.instance_id"] for t in found} == zero
    statuses = Counter(t.info.tags["perseval.status"] for t in by_agent)
    assert statuses["scored"] == len(values)
    # the IBA payload's scalars filter too: the dynamic-preference instances
    dynamic = {i for i, inst in instances.items() if inst.payload.get("dynamic") is True}
    got = _traces(f"{_of(rag)} AND tags.`perseval.payload.dynamic` = 'True'")
    assert {t.info.tags["perseval.instance_id"] for t in got} == dynamic


def test_spans_show_retrievals_with_gold_evidence_llm_calls_and_the_answer_extraction(tracked):
    exp, plan, root, *_ = tracked
    rag = next(c for c in plan.cells if c.agent == "iba-rag" and c.judge == "stub-judge")
    docs = StageStore(root, "documents", rag.run.data.key).read_records(Document)
    gold = {(d.owner, d.doc_id) for d in docs if d.meta.get("supports")}
    outputs = {o.instance_id: o for o in StageStore(root, "run", rag.run.key).read_records(AgentOutput)}
    judgments = StageStore(root, "judge", rag.judged.key).read_records(Judgment)
    owners = {i.instance_id: i.user_id for i in StageStore(root, "data", rag.run.data.key).read_records(Instance)}
    marked = 0
    for t in _traces(_of(rag)):
        out = outputs[t.info.tags["perseval.instance_id"]]
        user = owners[out.instance_id]  # gold evidence is the instance's own user's
        spans = {s.span_type: s for s in t.data.spans}
        root_span = next(s for s in t.data.spans if s.parent_id is None)
        assert root_span.inputs["query"] and root_span.outputs["text"] == out.text
        retrieval = spans[SpanType.RETRIEVER]
        recorded = next(e for e in out.trace if e.get("step") == "retrieve")["passages"]
        assert [d["id"] for d in retrieval.outputs] == [p["doc_id"] for p in recorded]
        assert [d["metadata"]["score"] for d in retrieval.outputs] == [p["score"] for p in recorded]
        assert [d["metadata"]["gold_evidence"] for d in retrieval.outputs] == \
            [(user, p["doc_id"]) in gold for p in recorded]
        marked += sum(d["metadata"]["gold_evidence"] for d in retrieval.outputs)
        llm = spans[SpanType.CHAT_MODEL]
        generate = next(e for e in out.trace if e.get("step") == "generate")
        assert llm.attributes[SpanAttributeKey.CHAT_USAGE] == {
            "input_tokens": generate["prompt_tokens"], "output_tokens": generate["completion_tokens"],
            "total_tokens": generate["prompt_tokens"] + generate["completion_tokens"]}
        assert llm.attributes["cached"] is generate["cached"] and llm.attributes["role"] == "agent"
        # the call lasts as long as its request took, and the trace as long as its steps
        took = llm.end_time_ns - llm.start_time_ns
        assert generate["latency_s"] > 0 and abs(took - generate["latency_s"] * 1e9) < 2e6
        order = [s.name for s in sorted(t.data.spans, key=lambda s: s.start_time_ns) if s.parent_id]
        assert order[:3] == [e["step"] for e in out.trace[:3]] and order[3] == "answer extraction"
        assert root_span.end_time_ns - root_span.start_time_ns >= took
        parser = spans[SpanType.PARSER]
        assert parser.inputs["raw"] == out.text and parser.outputs["parsed"] == out.parsed
        assert parser.outputs["status"] == out.status
        # the LLM call's reply and task; the gold mark in the passage text, not only behind a metadata chip
        assert llm.outputs["reply"] == out.text and llm.inputs["task"] == root_span.inputs["query"]
        # the prompt the agent sent: its messages as recorded, the task in the last one
        assert llm.inputs["messages"] == generate["messages"] and generate["messages"][-1]["role"] == "user"
        assert root_span.inputs["query"] in generate["messages"][-1]["content"]
        assert all(d["page_content"].startswith("[GOLD evidence") == d["metadata"]["gold_evidence"]
                   for d in retrieval.outputs)
        # each judgment a span: what was judged (statement, response) and the judge's raw answer and rationale
        mine = [j for j in judgments if j.instance_id == out.instance_id and j.repeat == out.repeat]
        judged = [sp for sp in t.data.spans if sp.name.startswith("judge: ") and sp.inputs["judge"] == "stub-judge"]
        assert sorted(sp.name for sp in judged) == sorted(f"judge: {j.kind}/{j.item_id}" for j in mine)
        for sp in judged:
            j = next(j for j in mine if sp.name == f"judge: {j.kind}/{j.item_id}")
            assert sp.span_type == SpanType.LLM and sp.inputs["response"] == out.text and sp.inputs["statement"]
            # the judge's literal request: the messages it was sent, the statement and the response quoted in them
            assert j.prompt and sp.inputs["messages"] == j.prompt["messages"]
            asked = " ".join(m["content"] for m in sp.inputs["messages"])
            assert sp.inputs["statement"] in asked and out.text[:200] in asked
            assert (sp.outputs["raw"], sp.outputs["rationale"], sp.outputs["status"]) == (j.raw, j.feedback, j.status)
    assert marked > 0  # some retrieved passage is gold evidence, so the mark is not always False


def test_assessments_are_the_judges_verdicts_with_rationale_and_unscored_raw_text(tracked):
    exp, plan, root, *_ = tracked
    cell = next(c for c in plan.cells if c.agent == "iba-rag" and c.judge == "stub-judge")
    judgments = StageStore(root, "judge", cell.judged.key).read_records(Judgment)
    assert {j.status for j in judgments} == {"scored", "unscored"}  # the stand-in leaves some unreadable
    got = {}
    for t in _traces(_of(cell), include_spans=False):
        for a in t.info.assessments:
            got[(t.info.tags["perseval.instance_id"], a.name)] = a
    for j in judgments:
        a = got[(j.instance_id, f"{j.kind}/{j.item_id}")]
        assert a.source.source_id == "stub-judge" and a.source.source_type == "LLM_JUDGE"
        if j.status == "scored":
            assert a.value == j.score and a.rationale == j.feedback and a.error is None
        else:
            assert a.value is None and a.error.error_code == "UNSCORED" and a.error.error_message == UNREADABLE
    assert sum(a.rationale is not None and a.error is None for a in got.values()) > 0


def test_a_second_track_of_the_same_results_writes_and_links_no_trace(tracked):
    """A cached re-run repeats the results of the run before it: it writes no trace and links none again (the
    first run's child runs hold them); its record names that run and keeps its trace ids."""
    from perseval.report.record import read_record, record_dir

    exp, plan, root, _, parents, _, seconds = tracked
    all_traces = _traces("", include_spans=False)
    runs = {c.run.key for c in plan.cells}
    n_outputs = sum(len(StageStore(root, "run", key).read_records(AgentOutput)) for key in runs)
    assert len(all_traces) == n_outputs  # one per output of each agent run: not one per judge, nor per track
    first, second = _children(parents[0]), _children(parents[1])
    for key, run in second.items():
        assert json.loads(first[key].data.tags["perseval.traces"])["written"] > 0
        assert "perseval.traces" not in run.data.tags and run.data.tags["perseval.computed_by"] == parents[0]
        assert not mlflow.search_traces(locations=[_experiment_id()], run_id=run.info.run_id, return_type="list",
                                        include_spans=False)
    records = [read_record(record_dir(root, p)) for p in parents]
    assert records[1].computed_by == parents[0] and \
        [i.trace_id for i in records[1].instances] == [i.trace_id for i in records[0].instances]
    print(f"track seconds: first {seconds[0]:.1f}, second {seconds[1]:.1f} ({n_outputs} traces)")
    assert seconds[1] < seconds[0]


def test_parent_runs_have_distinct_names_real_start_and_each_cells_headline(tracked):
    exp, plan, root, _, parents, _, _ = tracked
    client = MlflowClient()
    runs = [client.get_run(p) for p in parents]
    assert len({r.info.run_name for r in runs}) == 2
    assert all(r.info.run_name.startswith(f"{exp.experiment.name} ") and len(r.info.run_name) <= len(exp.experiment.name) + 15
               and r.data.params["experiment.key"] == exp.key() for r in runs)  # readable in the UI's run column
    started = int(psutil.Process().create_time() * 1000)  # this process ran both "runs"
    assert all(r.info.start_time == started and r.info.end_time > started for r in runs)
    for run in runs:
        children = _children(run.info.run_id)
        for cell in plan.cells:
            child = children[cell.key]
            metric = child.data.tags["perseval.headline_metric"]
            name = "headline/" + cell.name
            if metric in child.data.metrics:
                assert run.data.metrics[name] == child.data.metrics[metric]
    assert {k for k in runs[0].data.metrics if k.startswith("headline/")} == \
        {k for k in runs[1].data.metrics if k.startswith("headline/")} != set()
    # each headline score with its interval's bounds, the compact headline as the run's description, and the
    # experiment marked as model development so the UI opens on its runs (not the GenAI usage page)
    rag = next(c for c in plan.cells if c.agent == "iba-rag" and c.judge == "stub-judge")
    child = _children(runs[0].info.run_id)[rag.key]
    name = "headline/" + rag.name
    assert runs[0].data.metrics[f"{name}/ci_low"] == child.data.metrics["ci_low"] <= runs[0].data.metrics[name] \
        <= runs[0].data.metrics[f"{name}/ci_high"] == child.data.metrics["ci_high"]
    note = runs[0].data.tags["mlflow.note.content"]  # the headline as the terminal prints it
    assert any(ln.startswith("iba-rag/stub-judge ") for ln in note.splitlines()) and "±" not in note
    assert any(ln.startswith("iba-no-history/iba.slots ") for ln in note.splitlines())
    assert f"[{child.data.metrics['ci_low']:.1f}, {child.data.metrics['ci_high']:.1f}]" in note
    assert client.get_experiment(runs[0].info.experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_compare_between_two_cells_prints_the_instances_that_differ_most_with_trace_ids(tracked):
    exp, plan, root, _, parents, uri, _ = tracked
    rag = next(c for c in plan.cells if c.agent == "iba-rag" and c.judge == "iba.slots")
    oracle = next(c for c in plan.cells if c.agent == "iba-oracle" and c.judge == "iba.slots")
    result = CliRunner().invoke(app, ["compare", parents[1], "--between", rag.name, oracle.name, "--instances", "3",
                                      "--tracking-uri", uri])
    assert result.exit_code == 0, result.output
    scores = {c.key: {s.instance_id: s.value for s in StageStore(root, "score", c.key).read_records(InstanceScore)
                      if s.metric == "score"} for c in (rag, oracle)}
    gaps = {i: abs(scores[oracle.key][i] - scores[rag.key][i]) for i in scores[rag.key]
            if scores[rag.key][i] is not None and scores[oracle.key].get(i) is not None}
    top = max(gaps, key=gaps.get)
    assert gaps[top] > 0 and top in result.output
    ids = {t.info.tags["perseval.agent"]: t.info.trace_id for t in
           _traces(f"tags.`perseval.instance_id` = '{top}'", include_spans=False)}
    assert ids["iba-rag"] in result.output and ids["iba-oracle"] in result.output
    bad = CliRunner().invoke(app, ["compare", parents[1], "--between", "iba/nope", oracle.name, "--tracking-uri", uri])
    assert bad.exit_code == 2 and "names no cell" in bad.output


def _outcome(iid: str, score: float | None, status: str = "ok") -> Outcome:
    inst = Instance(iid, "iba", "u", "g", "q")
    return Outcome(inst, AgentOutput(iid, "a", 0, "x", status=status), [], score)


def test_selection_all_failed_and_first_n():
    outs = [_outcome("c", 100.0), _outcome("a", 0.0), _outcome("b", None, "failed"), _outcome("d", 50.0)]
    assert select(outs, "all") == outs
    assert [o.instance.instance_id for o in select(outs, "failed")] == ["a", "b"]
    assert [o.instance.instance_id for o in select(outs, 2)] == ["a", "b"]  # the first two ids, not the first two rows
    assert resolve_selection(None, AUTO_LIMIT - 1) == "all" and resolve_selection(None, AUTO_LIMIT) == AUTO_PER_CELL
    assert resolve_selection("failed", 10) == "failed"
    with pytest.raises(ValidationError):
        MLflowSettings(traces="some")
    with pytest.raises(ValidationError):
        MLflowSettings(traces=-1)


def test_tool_calls_of_a_react_agent_are_tool_spans(tmp_path):
    """The step shape perseval.benchmarks.apeb.agents.react records for a tool call and for the finish."""
    cell = make_plan(load_experiment(write_configs(tmp_path))).cells[0]
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    out = AgentOutput("i1", "apeb-react", 0, '{"ranking": ["p1"]}', parsed={"ranking": ["p1"]}, trace=[
        {"step": "act", "turn": 0, "via": "text", "thought": "look at the history", "tool": "search_history",
         "arguments": {"query": "running shoes"}, "observation": "2 views of p1"},
        {"step": "act", "turn": 1, "via": "text", "thought": "done", "tool": "finish",
         "arguments": {"ranking": ["p1"]}, "observation": "accepted", "repair": ["dropped 1 unknown id"]}])
    mlflow.set_experiment("tool-spans")
    trace_id = write_trace([(cell, Outcome(Instance("i1", "apeb", "u", "g", "q"), out))], "run-x", {})
    mlflow.flush_trace_async_logging(terminate=False)
    spans = mlflow.get_trace(trace_id).data.spans
    tools = [s for s in spans if s.span_type == SpanType.TOOL]
    assert [s.name for s in tools] == ["tool: search_history", "tool: finish"]
    assert tools[0].inputs["arguments"] == {"query": "running shoes"} and tools[0].outputs["observation"] == "2 views of p1"
    parser = next(s for s in spans if s.span_type == SpanType.PARSER)
    assert parser.outputs["repairs"] == [["dropped 1 unknown id"]]


# ---- from a score to its instances: `perseval samples` and `compare --between` by short names (issue 32) ----

def _cell(plan, agent: str, judge: str):
    return next(c for c in plan.cells if c.agent == agent and c.judge == judge and c.run.control is None)


def _trace_ids(cell) -> dict[str, str]:
    return {t.info.tags["perseval.instance_id"]: t.info.trace_id for t in _traces(_of(cell), include_spans=False)}


def test_samples_lists_every_instance_with_user_score_verdicts_rationales_and_trace(tracked, tmp_path):
    exp, plan, root, _, parents, uri, _ = tracked
    mlflow.set_tracking_uri(uri)  # an earlier test may have pointed it elsewhere
    cell = _cell(plan, "iba-rag", "stub-judge")
    page = tmp_path / "samples.html"
    result = CliRunner().invoke(app, ["samples", parents[1], "iba-rag/stub-judge", "--tracking-uri", uri,
                                      "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert "Downloading artifacts" not in result.output
    scores = {s.instance_id: s for s in StageStore(root, "score", cell.key).read_records(InstanceScore)
              if s.metric == "score"}
    ids = _trace_ids(cell)
    lines = result.output.splitlines()
    for iid, s in scores.items():
        line = next(ln for ln in lines if ln.split()[:1] == [iid])
        assert s.user_id in line and (f"{s.value:.1f}" if s.value is not None else "-") in line, line
        link = f"http://127.0.0.1:5000/#/experiments/{_experiment_id()}/traces?selectedEvaluationId={ids[iid]}"
        assert f"{iid}: {link}" in result.output  # where `perseval ui` opens its trace
    judgments = StageStore(root, "judge", cell.judged.key).read_records(Judgment)
    reasons = {j.feedback for j in judgments if j.status == "scored"}
    words = set(result.output.split())
    assert reasons and all(set(r.split()) <= words for r in reasons)  # each rationale (wrapped in its column)
    html = page.read_text()
    assert f"traces?selectedEvaluationId={ids[next(iter(scores))]}" in html and "sortBy(" in html
    low = CliRunner().invoke(app, ["samples", parents[1], "iba-rag/stub-judge", "--where", "score<50", "--sort",
                                   "-score", "--limit", "2", "--brief", "--tracking-uri", uri])
    assert low.exit_code == 0, low.output
    shown = [ln.split()[0] for ln in low.output.splitlines() if ln.split()[:1] and ln.split()[0] in scores]
    expected = sorted((i for i, s in scores.items() if s.value is not None and s.value < 50),
                      key=lambda i: (-scores[i].value, i))[:2]
    assert sorted(shown) == sorted(expected) and len(shown) == len(expected)


def test_each_cell_run_carries_its_samples_page_with_every_instance_score_and_trace_link(tracked, tmp_path):
    exp, plan, root, _, parents, uri, _ = tracked
    mlflow.set_tracking_uri(uri)
    cell = _cell(plan, "iba-rag", "stub-judge")
    run = _children(parents[0])[cell.key]
    page = Path(MlflowClient().download_artifacts(run.info.run_id, "samples.html", str(tmp_path))).read_text()
    ids = _trace_ids(cell)
    scores = [s for s in StageStore(root, "score", cell.key).read_records(InstanceScore) if s.metric == "score"]
    assert scores and page.count("<tr><td>") == len(StageStore(root, "run", cell.run.key).read_records(AgentOutput))
    for s in scores:  # each instance's row: its score, and its trace opened in the UI that shows the page
        row = page[page.index(f"<tr><td>{s.instance_id}</td>"):].split("</tr>")[0]
        assert ("" if s.value is None else f"<td>{s.value:.1f}</td>") in row
        assert f'href="/#/experiments/{run.info.experiment_id}/traces?selectedEvaluationId={ids[s.instance_id]}"' in row
    # built at track time from the record, the page is what `perseval samples --html` renders from its artifacts
    again = tmp_path / "again.html"
    got = CliRunner().invoke(app, ["samples", parents[0], "iba-rag/stub-judge", "--html", str(again), "--ui-url", "",
                                   "--tracking-uri", uri])
    assert got.exit_code == 0, got.output
    assert page == again.read_text()


def test_samples_refuses_an_ambiguous_cell_or_a_bad_filter_before_any_output(tracked):
    exp, plan, root, _, parents, uri, _ = tracked
    mlflow.set_tracking_uri(uri)  # an earlier test may have pointed it elsewhere
    both = CliRunner().invoke(app, ["samples", parents[1], "iba-rag", "--tracking-uri", uri])
    assert both.exit_code == 2 and both.output.startswith("error:")
    assert "names 2 cells" in both.output and "iba.slots" in both.output and "stub-judge" in both.output
    bad = CliRunner().invoke(app, ["samples", parents[1], "iba-rag/stub-judge", "--where", "colour=red",
                                   "--tracking-uri", uri])
    assert bad.exit_code == 2 and bad.output.startswith("error:") and "the fields: instance" in bad.output


def test_compare_between_short_names_pairs_the_agents_under_each_judge_with_scores_and_traces(tracked):
    exp, plan, root, _, parents, uri, _ = tracked
    mlflow.set_tracking_uri(uri)  # an earlier test may have pointed it elsewhere
    result = CliRunner().invoke(app, ["compare", parents[1], "--between", "iba-rag", "iba-no-history",
                                      "--tracking-uri", uri])
    assert result.exit_code == 0, result.output
    assert "Downloading artifacts" not in result.output and "|" not in result.output  # no pipe-markdown rows
    differing = 0
    for judge in ("stub-judge", "iba.slots"):
        a, b = _cell(plan, "iba-rag", judge), _cell(plan, "iba-no-history", judge)
        assert f"A = {a.name.split('/')[1]}/{judge}" in result.output  # the labels every view gives the cells
        assert f"B = {b.name.split('/')[1]}/{judge}" in result.output
        va, vb = ({s.instance_id: s.value for s in StageStore(root, "score", c.key).read_records(InstanceScore)
                   if s.metric == "score"} for c in (a, b))
        ta, tb = _trace_ids(a), _trace_ids(b)
        for iid in sorted(set(va) & set(vb)):
            if va[iid] is not None and vb[iid] is not None and va[iid] != vb[iid]:
                # one trace per agent output: the instance's line under each judge names the same two traces,
                # so the line is the one with this judge's scores
                line = next((ln for ln in result.output.splitlines() if ln.split()[:1] == [iid] and ta[iid] in ln
                             and "not_judged" not in ln), "")
                assert f"{va[iid]:.1f}" in line and f"{vb[iid]:.1f}" in line and tb[iid] in line, line
                differing += 1
    assert differing > 0  # the stand-in's verdicts make some instance differ between the two agents
    # --between prints only the instance tables (issue 42); compare alone, the scores with their intervals
    assert not any(ln.split()[:1] == ["iba-rag/stub-judge"] for ln in result.output.splitlines())
    scores = CliRunner().invoke(app, ["compare", parents[1], "--tracking-uri", uri], terminal_width=200)
    rag = next(ln for ln in scores.output.splitlines() if ln.split()[:1] == ["iba-rag/stub-judge"])
    assert "±" not in rag and re.search(r"\[\d+\.\d, \d+\.\d\]", rag), rag
    bad = CliRunner().invoke(app, ["compare", parents[1], "--between", "iba-rag", "iba-nope", "--tracking-uri", uri])
    assert bad.exit_code == 2 and bad.output.startswith("error:") and "'iba-nope' names no cell" in bad.output
    assert "did you mean" in bad.output and "iba-no-history" in bad.output


def test_a_long_prompt_is_kept_as_its_first_and_last_messages_each_clipped():
    from perseval.llm.usage import PROMPT_CHARS, PROMPT_MESSAGES, prompt_record

    chat = [{"role": "system", "content": "rules"}] + [
        {"role": "user" if i % 2 else "assistant", "content": f"turn {i} " + "x" * 3000} for i in range(1, 40)]
    kept = prompt_record(chat)
    assert len(kept["messages"]) == PROMPT_MESSAGES and kept["messages_left_out"] == len(chat) - PROMPT_MESSAGES
    assert kept["messages"][0] == chat[0] and kept["messages"][-1]["content"].startswith("turn 39 ")
    assert all(len(m["content"]) <= PROMPT_CHARS for m in kept["messages"])
    assert prompt_record(chat[:3]) == {"messages": [chat[0]] + [{**m, "content": m["content"][:PROMPT_CHARS]}
                                                                for m in chat[1:3]]}
