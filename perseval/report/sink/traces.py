"""Every agent output as an MLflow trace, linked to the child run of each cell that judges it: from a score
to what happened.

A trace is one (instance, repeat) of an agent run: a root span with the task query and the final output;
below it one span per step of the agent's own trace (each retrieval with its passages, their scores and
whether each is gold evidence; each LLM call with its role, tokens, duration, prompt and whether it came
from the request cache; each tool call of a ReAct / function-calling agent), then the answer extraction (raw
text -> parsed answer, repairs), then one span per judgment of every judge of that run. The verdicts are
assessments on the trace: one per checkpoint / criterion / slot / claim, with its value, rationale and
judge; an unscored or failed verdict carries its raw text as the assessment's error.

Everything is read from the Parquet records the run, judge and score stages wrote (AgentOutput.trace,
Judgment, InstanceScore), in the track stage, which builds the run record's instances from the same outcomes
(run_outcomes): a trace, the record and `samples` name one user per instance, the one the statistics cluster
on. Traces are written once per agent run (tag perseval.run_key):
a later track finds them in the experiment and links them to its own child runs, so a re-run writes no
trace again. A cell's traces are those tagged `perseval.score_key.<judge>` with its score key. Tags on
every trace (perseval.benchmark, .agent, .backbone, .judge, .instance_id, .user_id, .score, .status, per
judge .label.<judge> (the cell's name in every view), .status.<judge> and .score.<judge>, ...) make "IBA-Agent instances that scored 0 on a dynamic
preference" a filter in the UI and in `mlflow.search_traces`.
"""
from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterable, Iterator

import mlflow
import pyarrow.parquet as pq
from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, SpanType
from mlflow.tracing.constant import SpanAttributeKey, TraceMetadataKey
from mlflow.tracking import MlflowClient

from perseval.experiment.config import TraceSelection
from perseval.pipeline.units import Cell
from perseval.pipeline.stages import as_scored
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.core.schema import from_table
from perseval.core.store import StageStore
from perseval.metrics.ci_tables import cluster_of

# MLflow stores a trace in about 60-70 ms of CPU on this kind of machine (SQLite, its ORM): the default selection
# keeps the track stage a small share of a large run's wall time; the record and samples.jsonl hold every instance
AUTO_LIMIT = 500  # default selection: every instance of a run below this many outputs in all its cells
AUTO_PER_CELL = 25  # above it, the first this many instances of each cell (the same ones in every cell)
TEXT_CHARS = 2000  # a passage, an answer or a raw judge text is clipped to this in a span or an assessment
LINK_BATCH = 100  # MLflow links at most 100 traces to a run per call
# traces handed to MLflow's asynchronous export between two flushes: its queue holds a bounded number of tasks
# (MLFLOW_ASYNC_TRACE_LOGGING_MAX_QUEUE_SIZE, 1000 by default) and drops what comes when it is full, and an
# assessment on a dropped trace fails the track stage ("Trace ... not found")
EXPORT_BATCH = 100
TAG = "perseval."
USAGE = ("prompt_tokens", "completion_tokens", "cached", "status", "latency_s")
# trace steps that are one LLM request even where the agent records no token counts for them
LLM_STEPS = frozenset({"generate", "answer", "think", "refine", "expand", "expand_queries", "extract_preferences",
                       "salience", "plan_alignment", "synthesize", "controller", "evaluate"})
TOOL_STEPS = frozenset({"tool", "act"})


@dataclass
class Outcome:
    """One (instance, repeat) of a cell as the trace shows it."""

    instance: Instance
    output: AgentOutput
    judgments: list[Judgment] = field(default_factory=list)
    score: float | None = None  # the cell's headline metric (mean over judge repeats), None when unscored
    cluster: str = ""  # the score's user: the cluster its interval resamples (IBA: the persona); "" unscored

    @property
    def status(self) -> str:
        """failed / invalid (the agent's output); scored; else why there is no score: judge_failed (a verdict
        request failed), unscored (no verdict could be read), not_judged (this cell's judge judges none of it,
        e.g. an LLM judge on a rule-scored CallAPI instance)."""
        if self.output.status != "ok":
            return self.output.status
        if self.score is not None:
            return "scored"
        if not self.judgments:
            return "not_judged"
        return "judge_failed" if any(j.status == "failed" for j in self.judgments) else "unscored"

    @property
    def went_wrong(self) -> bool:
        """What `traces: failed` keeps: a failed or invalid output, a verdict that failed or could not be read,
        or a score of 0."""
        return self.status not in ("scored", "not_judged") or self.score == 0


def resolve_selection(selection: TraceSelection, n_outputs: int) -> str | int:
    """The `mlflow.traces` setting made concrete: None -> all below AUTO_LIMIT outputs, else AUTO_PER_CELL."""
    if selection is None:
        return "all" if n_outputs < AUTO_LIMIT else AUTO_PER_CELL
    return selection


def select(outcomes: list[Outcome], selection: str | int) -> list[Outcome]:
    """`all`, `failed` (went wrong), or the first N instances by id (every repeat of each)."""
    if selection == "all":
        return outcomes
    if selection == "failed":
        return [o for o in outcomes if o.went_wrong]
    keep = set(sorted({o.instance.instance_id for o in outcomes})[:int(selection)])
    return [o for o in outcomes if o.instance.instance_id in keep]


def n_outputs(root: str, cells: Iterable[Cell]) -> int:
    """How many agent outputs the cells hold (from the Parquet footers: no row is read)."""
    return sum(pq.ParquetFile(p).metadata.num_rows for c in cells for p in StageStore(root, "run", c.run.key).parts())


# ---- reading the stage records ------------------------------------------------------------------------

def _records(root: str, stage: str, key: str, cls: type) -> list[Any]:
    """A stage's records, none where it wrote no part (a cell whose outputs are all missing has no trace)."""
    store = StageStore(root, stage, key)
    return store.read_records(cls) if store.parts() else []


def run_records(root: str, cell: Cell, steps: bool = True) -> tuple[list[AgentOutput], dict[str, Instance]]:
    """The agent run's outputs and the instances they answer: what every judge cell of the run shares.
    `steps=False`: the outputs without their recorded steps (`trace`: retrieved passages, prompts; most of an
    output's size), for a reader that needs its answer and status only (with_steps adds them back)."""
    store = StageStore(root, "run", cell.run.key)
    if not store.parts():
        return [], {}
    names = None if steps else [f.name for f in fields(AgentOutput) if f.name != "trace"]
    outputs = from_table(store.read(columns=names), AgentOutput)
    return outputs, {i.instance_id: i for i in StageStore(root, "data", cell.run.data.key).read_records(Instance)}


def outcomes(root: str, cell: Cell, headline_metric: str,
             run: tuple[list[AgentOutput], dict[str, Instance]] | None = None) -> list[Outcome]:
    """Every agent output of the cell with its instance, its judgments and its headline score; `run`: the
    run's records (run_records) when the caller has read them already for another judge of the run."""
    outputs, instances = run if run is not None else run_records(root, cell)
    if not outputs:
        return []
    judged: dict[tuple[str, int], list[Judgment]] = defaultdict(list)
    for j in as_scored(root, cell, _records(root, "judge", cell.judged.key, Judgment)):  # `threshold: calibrated`
        judged[(j.instance_id, j.repeat)].append(j)
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    cluster: dict[str, str] = {}
    for s in _records(root, "score", cell.key, InstanceScore):
        cluster[s.instance_id] = s.user_id
        if s.metric == headline_metric and s.value is not None:
            values[(s.instance_id, s.repeat)].append(s.value)
    out = []
    for o in outputs:
        key = (o.instance_id, o.repeat)
        score = sum(values[key]) / len(values[key]) if values.get(key) else None
        inst = instances[o.instance_id]  # an instance no judge scored: its cluster all the same (one user id)
        out.append(Outcome(inst, o, judged.get(key, []), score, cluster.get(o.instance_id) or cluster_of(inst)))
    return sorted(out, key=lambda x: (x.instance.instance_id, x.output.repeat))


def gold_evidence(root: str, data_key: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(owner, doc_id) -> what the document supports, for the documents that carry preference evidence
    (IBA-layout `meta["supports"]`); only the owner, id and meta columns are read."""
    store = StageStore(root, "documents", data_key)
    if not store.parts():
        return {}
    table = store.read(columns=["owner", "doc_id", "meta"]).to_pydict()
    out = {}
    for owner, doc_id, meta in zip(table["owner"], table["doc_id"], table["meta"]):
        if meta and "supports" in meta:
            supports = json.loads(meta).get("supports")
            if supports:
                out[(owner, doc_id)] = supports
    return out


# ---- spans ----------------------------------------------------------------------------------------------

def _clip(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= TEXT_CHARS else value[:TEXT_CHARS] + f"... ({len(value)} chars)"
    if isinstance(value, list):
        return [_clip(v) for v in value]
    if isinstance(value, dict):
        return {k: _clip(v) for k, v in value.items()}
    return value


def _passages(entry: dict[str, Any]) -> list[dict[str, Any]] | None:
    for key in ("passages", "results"):
        items = entry.get(key)
        if isinstance(items, list) and items and all(isinstance(p, dict) and "doc_id" in p for p in items):
            return items
    return None


def _documents(items: list[dict[str, Any]], owner: str, gold: dict[tuple[str, str], Any]) -> list[dict[str, Any]]:
    """Passages as MLflow's retriever documents (page_content, metadata, id), each marked gold or not."""
    docs = []
    for p in items:
        supports = gold.get((owner, p["doc_id"]))
        meta = {k: v for k, v in p.items() if k != "text"} | {"gold_evidence": supports is not None}
        if supports:
            meta["supports"] = [{k: s.get(k) for k in ("dimension", "value", "phase") if k in s} for s in supports]
        mark = "" if supports is None else "[GOLD evidence" + (": " + "; ".join(
            f"{s.get('dimension')}={s.get('value')}" for s in supports if isinstance(s, dict)) if supports else "") + "] "
        docs.append({"page_content": mark + _clip(p.get("text", "")), "metadata": meta, "id": str(p["doc_id"])})
    return docs


@dataclass
class Clock:
    """The spans' times: the agent ran long before the track stage writes its trace, so each step is laid end
    to end from the trace's start, as long as its request took (`latency_s`; a step without one takes 0)."""

    now: int
    TICK = 1_000  # 1 µs: the least a span lasts, so the UI lists the spans in the order they happened

    def step(self, entry: dict[str, Any] | None = None) -> tuple[int, int]:
        start = self.now
        self.now += max(int(float((entry or {}).get("latency_s") or 0) * 1e9), self.TICK)
        return start, self.now


def _step_span(parent: Any, entry: dict[str, Any], outcome: Outcome, cell: Cell,
               gold: dict[tuple[str, str], Any], clock: Clock, last_llm: bool = False) -> None:
    """One step of the agent's recorded trace as a child span of the right type."""
    step = str(entry.get("step", "step"))
    start, end = clock.step(entry)
    items = _passages(entry)
    failed = entry.get("status") == "failed"
    if items is not None:
        span = mlflow.start_span_no_context(step, SpanType.RETRIEVER, parent_span=parent, start_time_ns=start,
                                            inputs={k: v for k, v in entry.items() if k not in ("passages", "results")})
        span.end(outputs=_documents(items, outcome.instance.user_id, gold), end_time_ns=end)
        return
    if step in TOOL_STEPS:
        name = entry.get("tool") or entry.get("name") or step
        span = mlflow.start_span_no_context(f"tool: {name}", SpanType.TOOL, parent_span=parent, start_time_ns=start,
                                            inputs=_clip({"tool": name, "arguments": entry.get("arguments"),
                                                          "thought": entry.get("thought")}))
        span.end(outputs=_clip({k: v for k, v in entry.items() if k not in ("arguments", "thought")}), end_time_ns=end)
        return
    if step in LLM_STEPS or "prompt_tokens" in entry or "completion_tokens" in entry:
        model = cell.run.model
        attrs: dict[str, Any] = {"role": "agent", "model": cell.backbone or "-", "cached": bool(entry.get("cached"))}
        if model is not None:
            attrs["sampling"] = model.sampling.model_dump()
        if "prompt_tokens" in entry or "completion_tokens" in entry:
            tin, tout = int(entry.get("prompt_tokens") or 0), int(entry.get("completion_tokens") or 0)
            attrs[SpanAttributeKey.CHAT_USAGE] = {"input_tokens": tin, "output_tokens": tout,
                                                  "total_tokens": tin + tout}
        inputs: dict[str, Any] = {"step": step, "model": cell.backbone or "-"}
        inputs["task"] = _clip(outcome.instance.query)  # what it answered, and the prompt where the agent kept it
        inputs |= {k: _clip(entry[k]) for k in ("messages", "messages_left_out") if k in entry}
        outputs = _clip({k: v for k, v in entry.items() if k not in (*USAGE, "messages", "messages_left_out")})
        if last_llm:  # the agent's final answer is this call's reply
            outputs["reply"] = _clip(outcome.output.text)
        span = mlflow.start_span_no_context(step, SpanType.CHAT_MODEL, parent_span=parent, attributes=attrs,
                                            inputs=inputs, start_time_ns=start)
        span.end(outputs=outputs, status="ERROR" if failed else "OK", end_time_ns=end)
        return
    span = mlflow.start_span_no_context(step, SpanType.CHAIN, parent_span=parent, inputs={"step": step},
                                        start_time_ns=start)
    span.end(outputs=_clip(entry), status="ERROR" if failed else "OK", end_time_ns=end)


def _is_llm(entry: dict[str, Any]) -> bool:
    return _passages(entry) is None and str(entry.get("step")) not in TOOL_STEPS and (
        str(entry.get("step")) in LLM_STEPS or "prompt_tokens" in entry or "completion_tokens" in entry)


def _statements(inst: Instance) -> dict[str, str]:
    """Item id -> what the judge was asked about it (a checkpoint's statement, a claim), where the gold says."""
    from perseval.kernel.registry import benchmark_class

    return {i: s for i, s, _ in benchmark_class(inst.benchmark).known_items(inst)}


def _judge_spans(root: Any, cell: Cell, outcome: Outcome, clock: Clock) -> None:
    """One span per judgment: what was judged (the item's statement and the response, clipped; an LLM judge's
    messages as sent) and the judge's raw answer, verdict and rationale; an LLM span for an LLM judge, an
    evaluator span for a rule."""
    statements = _statements(outcome.instance) if outcome.judgments else {}
    response = _clip(outcome.output.text)
    for j in outcome.judgments:
        start, end = clock.step()  # the judge's latency is not recorded: each verdict takes a tick
        llm = cell.judged.judge.uses_llm and j.judge != "rule"
        span = mlflow.start_span_no_context(
            f"judge: {j.kind}/{j.item_id}", SpanType.LLM if llm else SpanType.EVALUATOR, parent_span=root,
            inputs={"judge": j.judge if llm else f"rule:{j.kind}", "item": j.item_id,
                    "statement": statements.get(j.item_id, ""), "response": response, "judge_repeat": j.judge_repeat,
                    **(j.prompt or {})},  # the messages the judge was sent, as they were
            attributes={"role": "judge", "model": cell.judge_model or "-"}, start_time_ns=start)
        span.end(outputs={"raw": _clip(j.raw), "verdict": j.score, "status": j.status, "rationale": j.feedback},
                 status="ERROR" if j.status == "failed" else "OK", end_time_ns=end)


def _repairs(trace: list[dict[str, Any]]) -> list[Any]:
    return [e[k] for e in trace for k in ("repair", "repairs") if e.get(k)]


STATUS_ORDER = ("failed", "invalid", "judge_failed", "unscored", "scored", "not_judged")  # the trace's status


def trace_tags(judged: list[tuple[Cell, Outcome]], labels: dict[str, str] | None = None) -> dict[str, str]:
    """What a trace is filtered by: the agent's cell, then per judge its score key, status and score
    (`perseval.status.<judge>`, `perseval.score.<judge>`); `perseval.judge`, `.status` and `.score` say what
    the judges that judged the instance found (an IBA instance has one: the rule on CallAPI, the LLM judge on
    Generate); the instance's short scalar payload fields (scenario, dynamic, ...) too."""
    cell, outcome = judged[0]
    inst = outcome.instance
    tags = {"benchmark": cell.entry, "agent": cell.agent, "agent_kind": cell.run.agent.kind,
            "backbone": cell.backbone or "-", "retriever": cell.retriever, "run_key": cell.run.key,
            "cell": "/".join((cell.entry, cell.agent, cell.backbone or "-", cell.retriever)),
            # the user the statistics cluster on (IBA: the persona), as `samples` and the record name it
            "instance_id": inst.instance_id, "user_id": outcome.cluster or cluster_of(inst), "group": inst.group,
            "repeat": str(outcome.output.repeat), "judges": ",".join(c.judge for c, _ in judged)}
    for c, o in judged:  # per judge: its cell (as the record names it), its status and score of the instance
        tags |= {f"score_key.{c.judge}": c.key, f"status.{c.judge}": o.status,
                 f"label.{c.judge}": (labels or {}).get(c.key, c.name)}
        if o.score is not None:
            tags[f"score.{c.judge}"] = f"{round(o.score, 1):g}"
    seen = [(c, o) for c, o in judged if o.status != "not_judged"] or judged[:1]
    tags["judge"] = ",".join(c.judge for c, _ in seen)
    tags["judge_model"] = ",".join(sorted({c.judge_model or "-" for c, _ in seen}))
    tags["status"] = min((o.status for _, o in judged), key=STATUS_ORDER.index)
    scores = [o.score for _, o in seen if o.score is not None]
    if len(scores) == 1:
        tags["score"] = f"{round(scores[0], 1):g}"
    for k, v in inst.payload.items():
        if isinstance(v, (bool, int, float, str)) and len(str(v)) <= 100:
            tags[f"payload.{k}"] = str(v)
    return {TAG + k: v for k, v in tags.items()}


def write_trace(judged: list[tuple[Cell, Outcome]], run_id: str, gold: dict[tuple[str, str], Any],
                labels: dict[str, str] | None = None) -> str:
    """The trace of one agent output and every judge's verdicts on it, (cell, outcome) per judge of the same
    agent run (spans only; assessments follow once it is stored). Returns its id."""
    cell, outcome = judged[0]
    out, inst = outcome.output, outcome.instance
    clock = Clock(time.time_ns())
    root = mlflow.start_span_no_context(
        f"{cell.entry}/{cell.agent} {inst.instance_id}", SpanType.AGENT, start_time_ns=clock.now,
        inputs={"query": inst.query, "instance_id": inst.instance_id, "user_id": outcome.cluster or cluster_of(inst),
                "history_of": inst.user_id, "group": inst.group},
        tags=trace_tags(judged, labels), metadata={TraceMetadataKey.SOURCE_RUN: run_id},
        attributes={"agent": cell.agent, "backbone": cell.backbone or "-", "repeat": out.repeat,
                    "prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens})
    steps = [e for e in out.trace if isinstance(e, dict)]
    llm = [k for k, e in enumerate(steps) if _is_llm(e)]
    for k, entry in enumerate(steps):
        _step_span(root, entry, outcome, cell, gold, clock, last_llm=bool(llm) and k == llm[-1])
    start, end = clock.step()
    parser = mlflow.start_span_no_context("answer extraction", SpanType.PARSER, parent_span=root,
                                          inputs={"raw": _clip(out.text)}, start_time_ns=start)
    parser.end(outputs={"parsed": out.parsed, "status": out.status, "problem": out.error,
                        "repairs": _repairs(out.trace)}, end_time_ns=end)
    for c, o in judged:
        _judge_spans(root, c, o, clock)
    # each judge's score of the instance, or why it has none (this judge judged none of it, its verdicts were
    # unreadable): never a bare null beside a scored judge
    scores = {c.judge: o.score if o.score is not None else o.status for c, o in judged} if len(judged) > 1 \
        else outcome.score
    root.end(outputs=_clip({"text": out.text, "parsed": out.parsed, "status": out.status, "error": out.error,
                            "score": scores}),
             status="ERROR" if out.status == "failed" else "OK", end_time_ns=clock.now)
    return root.trace_id


# ---- assessments -----------------------------------------------------------------------------------------

def assess(trace_id: str, cell: Cell, outcome: Outcome, headline_metric: str, prefix: str = "") -> int:
    """The judge's verdicts on the trace, and the instance's headline score, each name after `prefix` (the
    judge's name where several judges judged the instance). Returns how many were logged."""
    spec = cell.judged.judge
    repeats = spec.repeats if spec.uses_llm else 1
    for j in outcome.judgments:
        kind = AssessmentSourceType.LLM_JUDGE if spec.uses_llm and j.judge != "rule" else AssessmentSourceType.CODE
        source = AssessmentSource(kind, j.judge if j.judge != "rule" else f"rule:{j.kind}")
        name = prefix + f"{j.kind}/{j.item_id}" + (f"#{j.judge_repeat}" if repeats > 1 else "")
        meta = {"judge": cell.judge, "judge_model": cell.judge_model or "-", "judge_repeat": str(j.judge_repeat),
                "status": j.status}
        if j.status == "scored":
            mlflow.log_feedback(trace_id=trace_id, name=name, value=j.score, rationale=j.feedback or None,
                                source=source, metadata=meta | {"raw": _clip(j.raw)})
        else:  # unscored or failed: no value, the raw text kept as the error (never a 0)
            mlflow.log_feedback(trace_id=trace_id, name=name, source=source, rationale=j.feedback or None,
                                error=AssessmentError(error_code=j.status.upper(),
                                                      error_message=_clip(j.raw) or j.feedback or j.status),
                                metadata=meta)
    if outcome.score is not None:
        mlflow.log_feedback(trace_id=trace_id, name=prefix + headline_metric, value=round(outcome.score, 2),
                            source=AssessmentSource(AssessmentSourceType.CODE, "perseval.score"),
                            rationale=f"{cell.name}: the instance's {headline_metric} (0-100)")
    return len(outcome.judgments) + (outcome.score is not None)


# ---- one agent run, every judge of it -------------------------------------------------------------------

def written_traces(experiment_id: str, run_key: str) -> dict[tuple[str, int], str]:
    """(instance_id, repeat) -> trace id of the traces already written for an agent run's outputs."""
    found = mlflow.search_traces(locations=[experiment_id], filter_string=f"tags.`{TAG}run_key` = '{run_key}'",
                                 include_spans=False, return_type="list")
    return {(t.info.tags[TAG + "instance_id"], int(t.info.tags.get(TAG + "repeat", 0))): t.info.trace_id
            for t in found}


Outcomes = dict[tuple[str, int], Outcome]  # (instance_id, repeat) -> what happened


def run_outcomes(root: str, cells: list[tuple[Cell, str]], steps: bool = True) -> Iterator[dict[str, Outcomes]]:
    """Per agent run, cell key -> every output of the cell (its (cell, headline metric) pair) with its instance,
    judgments and score: each run's records read once for all the cells that judge it, and one run's outcomes
    held at a time (a caller keeps what it needs of them, never every run's at once). `steps`: as run_records."""
    groups: dict[str, list[tuple[Cell, str]]] = {}
    for pair in cells:
        groups.setdefault(pair[0].run.key, []).append(pair)
    for group in groups.values():
        shared = run_records(root, group[0][0], steps)  # read once: every judge cell of the run answers the same
        yield {cell.key: {(o.instance.instance_id, o.output.repeat): o for o in outcomes(root, cell, metric, shared)}
               for cell, metric in group}


def with_steps(root: str, cell: Cell, found: Outcomes) -> Outcomes:
    """`found` (outcomes of one cell, read without their outputs' steps) with the steps read back: only these
    outputs' rows are decoded."""
    store = StageStore(root, "run", cell.run.key)
    ids = sorted({iid for iid, _ in found})
    if not ids or not store.parts():
        return found
    rows = store.read(filters=[("instance_id", "in", ids)], columns=["instance_id", "repeat", "trace"]).to_pylist()
    steps = {(r["instance_id"], r["repeat"]): r["trace"] for r in rows}
    return {k: replace(o, output=replace(o.output, trace=json.loads(steps[k]) if steps.get(k) else []))
            for k, o in found.items()}


def chosen(per_cell: list[Outcomes], selection: str | int) -> set[tuple[str, int]]:
    """The (instance_id, repeat) of one agent run's outputs that get a trace: those `selection` keeps under any
    of the run's judges (an output is kept when one of its outcomes is)."""
    keys = sorted(per_cell[0]) if per_cell else []
    return {(o.instance.instance_id, o.output.repeat) for d in per_cell for o in select(
        [d[k] for k in keys if k in d], selection)}


@dataclass
class RunTraces:
    """The cells that judge one agent run (its child runs and headline metrics), and the traces of its outputs:
    written now, with each judge's outcome, or written by an earlier track; `ids`: (instance_id, repeat) -> trace
    id of every selected output."""

    cells: list[tuple[Cell, str, str]]
    new: list[tuple[str, list[tuple[Cell, Outcome]]]] = field(default_factory=list)
    ids: dict[tuple[str, int], str] = field(default_factory=dict)


def by_agent_run(cells: list[tuple[Cell, str, str]]) -> list[list[tuple[Cell, str, str]]]:
    """The (cell, child run id, headline metric) triples grouped by the agent run their judges share."""
    groups: dict[str, list[tuple[Cell, str, str]]] = {}
    for triple in cells:
        groups.setdefault(triple[0].run.key, []).append(triple)
    return list(groups.values())


def log_traces(root: str, cells: list[tuple[Cell, str, str]], found: dict[str, Outcomes], experiment_id: str,
               selection: str | int, labels: dict[str, str] | None = None) -> dict[str, dict[tuple[str, int], str]]:
    """For each agent run of the (cell, child run id, headline metric) triples: write one trace per selected
    output that has none yet (`found`: each cell's outcomes, run_outcomes, or those `selection` keeps), with every judge's spans and
    verdicts, and link each trace to the child run of every judge cell; tag each child run with the counts. The
    spans of all cells are stored before the first assessment (MLflow's asynchronous trace export flushed after
    each agent run and every EXPORT_BATCH traces). Returns cell key -> (instance_id, repeat) -> trace id."""
    client = MlflowClient()
    parts = []
    for group in by_agent_run(cells):
        parts.append(_write_run(root, group, [found[c.key] for c, _, _ in group], experiment_id, selection, labels))
        if parts[-1].new:  # assessments need the stored traces, and the export queue room for the next run's
            mlflow.flush_trace_async_logging(terminate=False)
    out = {}
    for p in parts:
        n_assessments = {c.key: 0 for c, _, _ in p.cells}
        for tid, judged in p.new:
            by_judge = [(c, o) for c, o in judged if o.judgments or o.score is not None]
            for (c, o), (_, _, metric) in zip(judged, p.cells):
                prefix = f"{c.judge}: " if len(by_judge) > 1 else ""  # verdicts of two judges on one trace
                n_assessments[c.key] += assess(tid, c, o, metric, prefix)
        ids = list(p.ids.values())
        for cell, run_id, _ in p.cells:
            for i in range(0, len(ids), LINK_BATCH):
                client.link_traces_to_run(ids[i:i + LINK_BATCH], run_id)
            counts = {"written": len(p.new), "linked": len(ids) - len(p.new), "assessments": n_assessments[cell.key]}
            client.set_tag(run_id, TAG + "traces", json.dumps({**counts, "selection": selection}))
            out[cell.key] = p.ids
    return out


def _write_run(root: str, group: list[tuple[Cell, str, str]], per_cell: list[Outcomes], experiment_id: str,
               selection: str | int, labels: dict[str, str] | None) -> RunTraces:
    first = group[0][0]
    have = written_traces(experiment_id, first.run.key)
    picked = chosen(per_cell, selection)
    keys = [k for k in sorted(per_cell[0]) if k in picked]
    todo = [k for k in keys if k not in have]
    gold = gold_evidence(root, first.run.data.key) if todo else {}
    run_id = group[0][1]
    new, ids = [], {k: have[k] for k in keys if k in have}
    for n, k in enumerate(todo, 1):
        judged = [(cell, d[k]) for (cell, _, _), d in zip(group, per_cell)]
        ids[k] = write_trace(judged, run_id, gold, labels)
        new.append((ids[k], judged))
        if n % EXPORT_BATCH == 0:  # stored before the queue can fill: none is dropped
            mlflow.flush_trace_async_logging(terminate=False)
    return RunTraces(group, new, ids)
