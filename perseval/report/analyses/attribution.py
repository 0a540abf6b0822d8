"""Evidence attribution: did the gold evidence reach the agent's context before it answered?

On data whose history turns are tagged as evidence (IBA's constructed data and IBA-layout releases:
`Document.meta["supports"]`, or the flat `dimension` of older readers; the custom layout's `evidence`
column), the evidence recall of one output is the share of the instance's evidence turns of which at
least one passage was in the context the agent really used. That separates a retrieval failure (the
evidence never reached the prompt) from a usage failure (it did, and the answer still misses it): the
knowledge-to-action gap of IBA-Bench, per system.

Trace convention (shared with the agents): trace entries are dicts with a "step"; an entry with a
"passages" list holds {"doc_id", "chunk_id", "score", ...}. The passages put into the final prompt are
in entries with "step": "context"; an agent with no "context" entry is read at every entry that lists
passages (its retrievals). An agent whose trace lists no passages at all (an oracle, a profile-only
agent) has no measured context: its recall is None, not 0.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from perseval.core.instances import AgentOutput, Document, Instance
from perseval.benchmarks.views import ScenarioPayload
from perseval.report.record import Attribution

CONTEXT_STEP = "context"


def is_evidence(doc: Document) -> bool:
    return bool(doc.meta.get("supports")) or "dimension" in doc.meta


def evidence_turns(instances: Iterable[Instance], documents: Iterable[Document]) -> dict[str, set[str]]:
    """Instance id -> doc ids of its user's evidence turns for its scenario (an untagged scenario counts
    for every scenario of the user, as the IBA oracle reads it). Instances with none are left out."""
    by_owner: dict[str, list[Document]] = {}
    for d in documents:
        if is_evidence(d):
            by_owner.setdefault(d.owner, []).append(d)
    out: dict[str, set[str]] = {}
    for inst in instances:
        scenario = ScenarioPayload.of(inst).scenario
        ids = {d.doc_id for d in by_owner.get(inst.user_id, [])
               if d.meta.get("scenario") in (scenario, "", None)}
        if ids:
            out[inst.instance_id] = ids
    return out


def context_doc_ids(trace: list[dict[str, Any]]) -> set[str] | None:
    """Doc ids of the passages the agent used (None: its trace records no context at all)."""
    context = [e for e in trace if isinstance(e, dict) and e.get("step") == CONTEXT_STEP]
    entries = context or [e for e in trace if isinstance(e, dict) and isinstance(e.get("passages"), list)]
    if not entries:
        return None
    return {str(p["doc_id"]) for e in entries for p in e.get("passages") or [] if "doc_id" in p}


def output_recall(out: AgentOutput, evidence: set[str]) -> float | None:
    seen = context_doc_ids(out.trace)
    return None if seen is None else len(evidence & seen) / len(evidence)


def evidence_recall(outputs: Iterable[AgentOutput], evidence: Mapping[str, set[str]]) -> dict[str, float]:
    """Instance id -> mean evidence recall over its repeats, for instances with evidence and a context.
    A failed output (no answer) is left out like everywhere else."""
    values: dict[str, list[float]] = {}
    for out in outputs:
        if out.status == "failed" or out.instance_id not in evidence:
            continue
        r = output_recall(out, evidence[out.instance_id])
        if r is not None:
            values.setdefault(out.instance_id, []).append(r)
    return {iid: sum(v) / len(v) for iid, v in values.items()}


def attribution(recall: Mapping[str, float], scores: Mapping[str, float]) -> Attribution | None:
    """A cell's evidence recall and its score split by whether any evidence reached the context (None: no
    instance has evidence and a measured context)."""
    if not recall:
        return None
    reached = [scores[i] for i, r in recall.items() if r > 0 and _scored(scores.get(i))]
    missed = [scores[i] for i, r in recall.items() if r == 0 and _scored(scores.get(i))]
    return Attribution(evidence_recall=100.0 * sum(recall.values()) / len(recall), instances=len(recall),
                       score_reached=_mean(reached), reached=len(reached), score_missed=_mean(missed),
                       missed=len(missed))


def _scored(v: float | None) -> bool:
    return v is not None and v == v


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
