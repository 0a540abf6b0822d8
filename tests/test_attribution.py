"""Evidence attribution: the evidence turns of an instance, the passages an agent used (its "context"
trace entry, else its retrievals, else none), and the recall and score split of a cell."""
from __future__ import annotations

import asyncio

import pytest

from perseval.agents.rag import RagAgent
from perseval.report.analyses.attribution import attribution, context_doc_ids, evidence_recall, evidence_turns
from perseval.core.instances import AgentOutput, Document, Instance

from .scripted import ScriptedChat
from .conftest import build, context


def _out(iid: str, trace: list, status: str = "ok") -> AgentOutput:
    return AgentOutput(iid, "a", 0, "", status=status, trace=trace)


def _ctx(*doc_ids: str, step: str = "context") -> dict:
    return {"step": step, "passages": [{"doc_id": d, "chunk_id": 0, "score": 1.0} for d in doc_ids]}


def test_evidence_turns_are_the_users_tagged_turns_of_the_instances_scenario():
    docs = [Document("u", "e1", "x", meta={"scenario": "S", "supports": [{"dimension": "d", "value": "v"}]}),
            Document("u", "e2", "x", meta={"scenario": "T", "supports": [{"dimension": "d", "value": "v"}]}),
            Document("u", "e3", "x", meta={"dimension": "d", "value": "w"}),  # untagged scenario: every one
            Document("u", "n1", "x", meta={"kind": "noise"}), Document("w", "e4", "x", meta={"supports": [{}]})]
    insts = [Instance("i", "iba", "u", "g", "q", {"scenario": "S"}), Instance("j", "iba", "z", "g", "q", {})]
    assert evidence_turns(insts, docs) == {"i": {"e1", "e3"}}  # j's user has none: left out


def test_the_context_entry_wins_over_retrievals_and_no_passages_means_no_context():
    assert context_doc_ids([_ctx("a", "b", step="retrieve"), _ctx("a")]) == {"a"}
    assert context_doc_ids([_ctx("a", step="retrieve"), _ctx("b", step="retrieve_facet")]) == {"a", "b"}
    assert context_doc_ids([{"step": "oracle_evidence", "evidence": []}]) is None
    assert context_doc_ids([_ctx()]) == set()  # a context that was empty: recall 0, not None


def test_a_cell_reports_recall_and_its_score_split_by_whether_the_evidence_reached_the_context():
    evidence = {"i1": {"e1", "e2"}, "i2": {"e3"}, "i3": {"e4"}, "i4": {"e5"}}
    outs = [_out("i1", [_ctx("e1", "n")]), _out("i2", [_ctx("n")]), _out("i3", [_ctx("e4")]),
            _out("i4", [_ctx("e5")], status="failed"), _out("i5", [_ctx("x")]),
            _out("i1", [{"step": "generate"}])]
    recall = evidence_recall(outs, evidence)
    assert recall == {"i1": 0.5, "i2": 0.0, "i3": 1.0}  # a failed output and a traceless repeat are left out
    f = attribution(recall, {"i1": 100.0, "i2": 0.0, "i3": 50.0})
    assert f.evidence_recall == pytest.approx(50.0) and f.instances == 3
    assert (f.score_reached, f.reached) == (75.0, 2)
    assert (f.score_missed, f.missed) == (0.0, 1)
    assert attribution({}, {}) is None


def test_rag_records_the_passages_of_its_prompt_and_they_are_scored_against_the_real_evidence():
    data = build(sample=2, scenarios=["Appointment registration"])
    inst = data.instances[0]
    llm = ScriptedChat('{"visit_mode": "video"}')
    out = asyncio.run(RagAgent({"top_k": 3}).act(inst.public(), context(data, llm, []), 0, "rag"))
    (entry,) = [e for e in out.trace if e["step"] == "context"]
    used = [p["doc_id"] for p in entry["passages"]]
    assert len(used) == 3
    texts = {d.doc_id: d.text for d in data.documents}
    assert all(texts[d][:30] in llm.calls[0]["messages"][-1]["content"] for d in used)  # the prompt's passages
    evidence = evidence_turns(data.instances, data.documents)
    recall = evidence_recall([out], evidence)[inst.instance_id]
    assert recall == len(evidence[inst.instance_id] & set(used)) / len(evidence[inst.instance_id])


def test_evidence_documents_are_the_tagged_ones_read_without_their_text(tmp_path):
    """The evidence analyses (attribution in the record, IBA's evidence by step) read only the documents tagged
    as evidence, with owner, id and meta and no text: the same documents is_evidence keeps of all of them."""
    from perseval.core.instances import Document
    from perseval.core.store import StageStore
    from perseval.pipeline.stages import evidence_documents, load_documents
    from perseval.report.analyses.attribution import is_evidence
    docs = [Document("u1", "u1#0", "plain turn", meta={"item_id": "3"}),
            Document("u1", "u1#1", "I am vegan", meta={"supports": [{"dimension": "diet", "value": "vegan"}]}),
            Document("u2", "u2#0", "a turn", meta={}),
            Document("u2", "u2#1", "tagged", meta={"dimension": "tone"}),
            Document("u3", "u3#0", "no supports", meta={"supports": []})]
    store = StageStore(tmp_path, "documents", "d")
    store.write_records(0, docs[:3], Document)
    store.write_records(1, docs[3:], Document)
    got = evidence_documents(str(tmp_path), "d")
    assert all(d.text == "" for d in got)
    whole = [d for d in load_documents(str(tmp_path), "d") if is_evidence(d)]
    assert [(d.owner, d.doc_id, d.meta) for d in got if is_evidence(d)] == [(d.owner, d.doc_id, d.meta) for d in whole]
    assert {d.doc_id for d in whole} == {"u1#1", "u2#1"}
    assert evidence_documents(str(tmp_path), "none") == []
