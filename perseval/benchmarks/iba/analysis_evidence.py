"""Evidence kept at each step of an agent (`evidence_by_step`): of the instances' gold evidence turns, the share
each step of the agent's trace held - first retrieval, query expansion, redundancy filter, salience re-ranking,
compact evidence, and the final prompt (the trace's "context" step).

The agent never sees which turns are evidence: its trace names passages by doc_id only, and membership is
computed here, afterwards, from the instance's history documents (`Document.meta["supports"]`). A step the
agent does not have (plain RAG has no expansion) is empty (NaN), never 0.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

import pandas as pd

from perseval.benchmarks.iba.qa import task_instances
from perseval.benchmarks.views import ScenarioPayload
from perseval.core.instances import Document, Instance

STEPS = ("first_retrieval", "expansion", "dedup", "salience", "compact_evidence", "context")
CELL = ["agent", "backbone", "retriever"]


def _ids(entry: dict[str, Any] | None) -> set[str] | None:
    if entry is None or not isinstance(entry.get("passages"), list):
        return None
    return {str(p["doc_id"]) for p in entry["passages"] if isinstance(p, dict) and "doc_id" in p}


def _last(trace: list[dict[str, Any]], step: str) -> dict[str, Any] | None:
    return next((t for t in reversed(trace) if t.get("step") == step), None)


def step_passages(trace: list[dict[str, Any]] | str | None) -> dict[str, set[str] | None]:
    """doc_ids each step held (None: the trace has no such step)."""
    if isinstance(trace, str):
        trace = json.loads(trace) if trace else []
    trace = [t for t in trace or [] if isinstance(t, dict)]
    retrievals = [t for t in trace if str(t.get("step", "")).startswith("retrieve") and "passages" in t]
    names = {str(t.get("step")) for t in trace}
    expanded = [_ids(t) or set() for t in retrievals] if "retrieve_expanded" in names else None
    return {
        "first_retrieval": _ids(retrievals[0]) if retrievals else None,
        "expansion": set().union(*expanded) if expanded else None,
        "dedup": _ids(_last(trace, "redundancy_filter")),
        "salience": _ids(_last(trace, "kept_passages")) if "salience" in names else None,
        "compact_evidence": _ids(_last(trace, "compact_evidence")),
        "context": _ids(_last(trace, "context")),
    }


def gold_evidence(instance: Instance, documents: Iterable[Document]) -> set[str]:
    """The instance's evidence turns: its user's turns with `supports`, of its scenario (or of none) - another
    scenario's evidence in a shared persona history is a distractor, not this task's evidence."""
    scenario = ScenarioPayload.of(instance).scenario
    return {d.doc_id for d in documents if d.owner == instance.user_id and d.meta.get("supports")
            and d.meta.get("scenario") in (None, "", scenario)}


def held_by_step(trace: Any, gold: set[str]) -> dict[str, int | None]:
    """Evidence turns held per step (None where the trace has no such step)."""
    return {step: (len(ids & gold) if ids is not None else None) for step, ids in step_passages(trace).items()}


def evidence_by_step(outputs: pd.DataFrame, documents: list[Document], instances: list[Instance]) -> pd.DataFrame | None:
    """Per cell (agent, backbone, retriever): instances, gold evidence turns, and the share of them each step
    held (pooled over instances and repeats). None when no task instance has evidence turns."""
    tasks = {i.instance_id: i for i in task_instances(instances)}
    by_owner: dict[str, list[Document]] = {}
    for d in documents:
        by_owner.setdefault(d.owner, []).append(d)
    gold = {iid: gold_evidence(i, by_owner.get(i.user_id, [])) for iid, i in tasks.items()}
    if outputs is None or outputs.empty or not any(gold.values()):
        return None
    rows = []
    # column by column, not a dict per output (to_dict("records") copied every output, its trace included)
    cells = zip(*[outputs[c] if c in outputs else ["-"] * len(outputs) for c in CELL])
    traces = outputs["trace"] if "trace" in outputs else [None] * len(outputs)
    for iid, trace, cell in zip(outputs["instance_id"], traces, cells):
        g = gold.get(iid)
        if not g:
            continue
        held = held_by_step(trace, g)
        rows.append({**dict(zip(CELL, cell)), "instance_id": iid, "gold": len(g),
                     **{s: (float("nan") if v is None else v) for s, v in held.items()}})
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    out = []
    for cell, part in frame.groupby(CELL, sort=False):
        row = dict(zip(CELL, cell), n=int(part["instance_id"].nunique()),
                   evidence_turns=int(part.drop_duplicates("instance_id")["gold"].sum()))
        for step in STEPS:
            known = part[part[step].notna()]
            row[step] = known[step].sum() / known["gold"].sum() if len(known) else float("nan")
        out.append(row)
    return pd.DataFrame(out)
