"""Bespoke's scripted model and agent context, shared by tests/test_bespoke_protocol.py and
tests/test_bespoke_paper_settings.py."""
from __future__ import annotations

import json

from perseval.agents.base import AgentContext
from perseval.benchmarks.bespoke.layout import CRITERIA
from perseval.core.instances import Passage

EP = json.dumps({c: {"score": s, "feedback": f"{c} note"} for c, s in zip(CRITERIA, (4, 3, 5, 2))})


def answer(messages: list[dict]) -> str:
    """A scripted backbone/judge: keeps chat sessions (not searches), answers every prompt kind."""
    user = messages[-1]["content"]
    if user.startswith("Fact:"):
        return json.dumps({"verdict": "battery" in user.split("<response>")[1], "reason": "x"})
    if '{"keep"' in user:
        return json.dumps({"keep": "(a past chat)" in user, "reason": "r"})
    if "scores before feedback" in user:
        return EP
    if "Generated feedback" in user:
        return "not json at all"
    if "BEGIN ANALYSIS" in user:
        return "<BEGIN ANALYSIS>\nNeed alignment: 5 = everything asked\n<END ANALYSIS>"
    if "<query>" in user and "<chat history>" in user:
        return "PROFILE: wants plain words and bullets"
    return "The battery is the main cost."



def context(data, llm, search_results=None):
    docs: dict[str, list] = {}
    for d in data.documents:
        docs.setdefault(d.owner, []).append(d)

    async def search(inst, query, k):
        return search_results if search_results is not None else [Passage("page-x", 0, "CORPUS PASSAGE", 0.9)]

    async def retrieve(owner, query, k):
        return [Passage(d.doc_id, 0, d.text, 1 / (i + 1)) for i, d in enumerate(docs.get(owner, []))][:k]

    return AgentContext(llm=llm, retrieve=retrieve, documents=lambda o: list(docs.get(o, [])), search=search)

