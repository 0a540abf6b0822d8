"""IBA-Agent, issue 22: evidence kept at each step (trace + `evidence_by_step`), a weak rater that cannot keep
less than the retrieval it re-ranks, the paper's rating / compact-evidence settings, the synthesis fallback to
the evidence, and extraction answers cut short or copying dates."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from perseval.benchmarks.iba.agents.iba_agent.agent import IbaAgent
from perseval.benchmarks.iba.agents.iba_agent.alignment import clean_preference, parse_compact, parse_preferences
from perseval.benchmarks.iba.agents.iba_agent.deep_retrieval import select_robust
from perseval.benchmarks.iba.analysis_evidence import STEPS, evidence_by_step, held_by_step, step_passages
from perseval.core.instances import Document, Instance, Passage
from tests.scripted import ScriptedChat
from tests.iba_agent_helpers import FakeRetriever, TASK, entry, instance, prompts_of, responder, run, stage_of

STATEMENT = "User: I always want the related work before the method.\nAssistant: Noted."


def history() -> tuple[list[Passage], list[Document]]:
    """Ten turns; u1-t00002 is the evidence turn (the agent only ever sees doc ids and text)."""
    ps = [Passage(f"u1-t{i:05d}", 0, STATEMENT if i == 2 else f"User: chat {i} about lunch\nAssistant: ok",
                  1.0 - i / 20) for i in range(10)]
    docs = [Document("u1", p.doc_id, p.text, f"2025-02-{i + 1:02d}T10:00:00",
                     meta={"scenario": "Academic paper writing", "supports": [{"dimension": "order"}]} if i == 2
                     else {"kind": "noise"}) for i, p in enumerate(ps)]
    return ps, docs


def task_first(ps: list[Passage]) -> FakeRetriever:
    """The task text finds passages 0-2 (the evidence among them); each facet query finds others."""
    return FakeRetriever(lambda q, k: ps[:k] if q == TASK else ps[3 + abs(hash(q)) % 6:][:k])


def loud_noise(messages) -> str:
    """What the 135M rater did on real chat text: plain statements 'relevant, no signal' (3), noise 10."""
    loud = STATEMENT.split("\n")[0] not in messages[-1]["content"]
    return json.dumps({"relevant": True, "signals": ["correction", "complaint", "statement"] if loud else []})


# --- per-step evidence in the trace --------------------------------------------------------------------------


def test_the_trace_names_the_passages_of_every_step_and_membership_is_computed_afterwards():
    ps, docs = history()
    llm = ScriptedChat(responder(salience=loud_noise))
    out = run(IbaAgent(), instance(), llm, task_first(ps), docs)
    held = held_by_step(out.trace, {"u1-t00002"})
    assert held == {"first_retrieval": 1, "expansion": 1, "dedup": 1, "salience": 1, "compact_evidence": 1,
                    "context": 1}
    context = entry(out, "context")["passages"]
    assert {"doc_id", "chunk_id", "score"} <= set(context[0])
    # the context step lists exactly what the final prompt holds
    final = prompts_of(llm, "synthesize")[0]
    shown = {p.doc_id for p in ps if p.text.split("\n")[0][len("User: "):] in final}
    assert {p["doc_id"] for p in context} == shown
    # nothing of the gold tags reaches the model
    assert not any("supports" in json.dumps(c["messages"]) for c in llm.calls)
    # every LLM step's trace entry holds the prompt it sent (salience: the first of its per-passage requests)
    for step in ("expand_queries", "salience", "extract_preferences", "plan_alignment", "synthesize"):
        recorded = entry(out, step)["messages"]
        assert recorded in [c["messages"] for c in llm.calls], step
    assert entry(out, "salience")["prompt_of"].startswith("the first of")


def test_the_papers_selection_loses_the_evidence_to_a_weak_rater_the_robust_one_keeps_it():
    ps, docs = history()
    paper = {"selection": "threshold", "min_passages": 0, "synthesis_evidence": "fallback"}
    out = run(IbaAgent(paper), instance(), ScriptedChat(responder(salience=loud_noise)), task_first(ps), docs)
    held = held_by_step(out.trace, {"u1-t00002"})
    assert held["first_retrieval"] == 1 and held["salience"] == 0 and held["context"] == 0
    robust = run(IbaAgent(), instance(), ScriptedChat(responder(salience=loud_noise)), task_first(ps), docs)
    kept = entry(robust, "kept_passages")
    assert kept["selection"] == "robust" and set(kept["task_top_k_below_threshold"]) == {"u1-t00002"}
    assert {p["doc_id"] for p in kept["passages"]} >= {"u1-t00000", "u1-t00001", "u1-t00002"}
    assert len(kept["passages"]) <= 10


def test_robust_selection_ranks_by_score_then_retrieval_and_drops_only_confident_zeros():
    ps = [Passage(f"d{i}", 0, f"text {i}", s) for i, s in enumerate([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])]
    first = ps[:3]
    scores = [0, 3, None, 9, 9, 2]  # d0 confidently unrelated; d2 unreadable
    chosen, below = select_robust(ps, scores, first, threshold=5, cap=10, confident_drop=0)
    assert [ps[i].doc_id for i in chosen] == ["d3", "d4", "d2", "d1"]  # ties by retrieval score; d5 below, not first
    assert [ps[i].doc_id for i in below] == ["d1"]
    # the cap never cuts the task text's own top-k; confident_drop -1: nothing of it is ever dropped
    chosen, _ = select_robust(ps, scores, first, threshold=5, cap=2, confident_drop=-1)
    assert {ps[i].doc_id for i in chosen} == {"d0", "d1", "d2"}


# --- the paper's settings: the model's own 0..10 rating, the LLM compact evidence -------------------------------


def test_rating_mode_asks_the_model_for_table12_scores_and_keeps_five_and_above():
    ps, docs = history()
    seen: list[str] = []

    def rate(messages):
        seen.append(messages[-1]["content"])
        return '{"score": 7}' if "related work" in messages[-1]["content"] else '{"score": 2}'

    out = run(IbaAgent({"salience": "rating", "selection": "threshold", "min_passages": 0}), instance(),
              ScriptedChat(responder(salience=rate)), task_first(ps), docs)
    assert "Explicit" in seen[0] or "explicitly revises" in seen[0]
    assert "+3-4" in seen[0] and "+2" in seen[0] and "+1" in seen[0]
    assert [p["doc_id"] for p in entry(out, "kept_passages")["passages"]] == ["u1-t00002"]
    assert entry(out, "salience")["mode"] == "rating"


def test_llm_compact_evidence_keeps_the_cited_lines_and_falls_back_to_the_rule():
    ps, docs = history()
    base = responder(salience='{"relevant": true, "signals": ["statement"]}')
    asked: list[str] = []

    def compact(messages):
        if "condense" not in messages[0]["content"]:
            return base(messages)
        asked.append(messages[-1]["content"])
        n = next(ln.split(".")[0] for ln in messages[-1]["content"].splitlines() if "related work" in ln)
        return f"{n}. wants related work before the method"

    out = run(IbaAgent({"compact": "llm"}), instance(), ScriptedChat(compact), task_first(ps), docs)
    ev = entry(out, "compact_evidence")
    assert len(asked) == 1 and ev["mode"] == "llm" and ev["fallback"] is False
    assert ev["evidence"] == "1. wants related work before the method [2025-02-03]"
    assert [p["doc_id"] for p in ev["passages"]] == ["u1-t00002"]
    assert parse_compact("2. a\nfoo\n9. out of range\n2. again\n1) b", 3) == [(0, "b"), (1, "a")]
    unusable = lambda m: "no idea" if "condense" in m[0]["content"] else base(m)  # noqa: E731
    ev = entry(run(IbaAgent({"compact": "llm"}), instance(), ScriptedChat(unusable), task_first(ps), docs),
               "compact_evidence")
    assert ev["fallback"] is True and "related work before the method. [2025-02-03]" in ev["evidence"]
    assert len(ev["passages"]) > 1


# --- synthesis falls back to the evidence; extraction salvage and dates ---------------------------------------


def test_when_extraction_finds_nothing_the_final_prompt_holds_the_evidence_even_with_a_plan():
    ps, docs = history()
    llm = ScriptedChat(responder(extract="I cannot tell."))
    out = run(IbaAgent({"synthesis_evidence": "fallback"}), instance(), llm, task_first(ps), docs)
    assert entry(out, "extract_preferences")["fallback"] is True and entry(out, "plan_alignment")["plan"]
    final = prompts_of(llm, "synthesize")[0]
    assert "Plan:" in final and "related work before the method" in final
    assert "u1-t00002" in {p["doc_id"] for p in entry(out, "context")["passages"]}
    # with preferences, `fallback` leaves the evidence out; `always` (the default) keeps it beside them
    llm = ScriptedChat(responder())
    out = run(IbaAgent({"synthesis_evidence": "fallback"}), instance(), llm, task_first(ps), docs)
    assert "Evidence from the user's history" not in prompts_of(llm, "synthesize")[0]
    assert entry(out, "context")["passages"] == []
    llm = ScriptedChat(responder())
    run(IbaAgent(), instance(), llm, task_first(ps), docs)
    assert "related work before the method" in prompts_of(llm, "synthesize")[0]


def test_compact_evidence_is_made_once_per_run():
    ps, docs = history()
    llm = ScriptedChat(responder(extract="I cannot tell."))
    out = run(IbaAgent(), instance(), llm, task_first(ps), docs)
    assert [t["step"] for t in out.trace].count("compact_evidence") == 1


def test_an_extraction_cut_by_max_tokens_is_salvaged():
    cut = '{"preferences": ["sparse citations", "1. Immunologists who review the draft want'
    assert parse_preferences(cut, 8) == ["sparse citations", "Immunologists who review the draft want"]
    assert parse_preferences('{"preferences": ["short notes", "cu', 8) == ["short notes"]  # a one-word stub is dropped
    llm = ScriptedChat(responder(extract=cut))
    out = run(IbaAgent(), instance(), llm)
    assert entry(out, "extract_preferences")["fallback"] is False
    assert "Immunologists who review" in prompts_of(llm, "synthesize")[0]


def test_dates_copied_from_the_evidence_are_not_preferences():
    answer = '{"preferences": ["1. 2025-01-11", "[2025-02-03]", "2. wants bullet points [2025-02-03]", "3."]}'
    assert parse_preferences(answer, 8) == ["wants bullet points"]
    assert parse_preferences('{"preferences": ["1. 2025-01-11", "2025-01-12T10:00:00"]}', 8) is None
    assert clean_preference("- (2025-03-09) prefers oat milk") == "prefers oat milk"
    # and the evidence a small model reads no longer starts its lines with them
    ps, docs = history()
    llm = ScriptedChat(responder())
    run(IbaAgent(), instance(), llm, task_first(ps), docs)
    evidence_lines = [ln for ln in prompts_of(llm, "extract")[0].splitlines() if ln[:1].isdigit()]
    assert evidence_lines and all(ln.split(". ", 1)[1][:1] != "[" for ln in evidence_lines)


# --- the analysis table -------------------------------------------------------------------------------------------


def test_evidence_by_step_pools_the_share_of_evidence_turns_per_cell():
    ps, docs = history()
    docs.append(Document("u2", "u2-t0", "User: x", "2025-01-01T00:00:00", meta={"supports": [{"d": 1}]}))
    docs.append(Document("u2", "u2-t1", "User: y", "2025-01-02T00:00:00", meta={"supports": [{"d": 1}]}))
    insts = [instance(), Instance("i2", "iba", "u2", "Writing", TASK, {"scenario": "S", "action_type": "generate"},
                                  {})]
    agent = run(IbaAgent(), insts[0], ScriptedChat(responder(salience=loud_noise)), task_first(ps), docs)
    rag_trace = [{"step": "retrieve", "passages": [{"doc_id": "u2-t0", "chunk_id": 0, "score": 0.5}]}]
    outputs = pd.DataFrame([
        {"instance_id": insts[0].instance_id, "agent": "iba-agent", "backbone": "m", "retriever": "r",
         "trace": agent.trace},
        {"instance_id": "i2", "agent": "iba-agent", "backbone": "m", "retriever": "r", "trace": json.dumps(
            [{"step": "retrieve", "passages": []}, {"step": "context", "passages": [{"doc_id": "u2-t1"}]}])},
        {"instance_id": "i2", "agent": "iba-rag", "backbone": "m", "retriever": "r", "trace": rag_trace}])
    table = evidence_by_step(outputs, docs, insts).set_index("agent")
    a = table.loc["iba-agent"]
    assert (a["n"], a["evidence_turns"]) == (2, 3)
    assert a["first_retrieval"] == pytest.approx(1 / 3) and a["context"] == pytest.approx(2 / 3)
    assert a["salience"] == pytest.approx(1.0)  # only the run with a salience step counts, 1 of its 1
    r = table.loc["iba-rag"]
    assert r["first_retrieval"] == 0.5 and all(math.isnan(r[s]) for s in STEPS[1:])  # no such step: NaN, not 0
    assert set(STEPS) <= set(table.columns)
    assert step_passages(None)["context"] is None
