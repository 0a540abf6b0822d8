"""IBA-Agent test helpers shared by tests/test_iba_agent.py and tests/test_iba_agent_steps.py: instances,
a fake history back end, a prompt-inspecting model, and readers of an output's trace."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from perseval.agents.base import AgentContext
from perseval.benchmarks.iba.agents.iba_agent.agent import IbaAgent
from perseval.benchmarks.iba.agents.iba_agent.prompts import FACETS
from perseval.core.instances import Document, Instance, Passage
from tests.scripted import ScriptedChat

TASK = "Write the introduction for my paper on soil radar."

# --- fixtures: instances, a fake history back end, a prompt-inspecting model ----------------------------


def instance(action: str = "generate", **payload: Any) -> Instance:
    base: dict[str, Any] = {"scenario": "Academic paper writing", "action_type": action}
    if action == "call_api":
        base["api"] = {"name": "book_train", "description": "", "task_fixed": {"destination": "Lyon"},
                       "slots": [{"name": "destination", "type": "string", "values": []},
                                 {"name": "seat", "type": "string", "values": ["window", "aisle"]},
                                 {"name": "fare", "type": "string", "values": ["flexible", "saver"]}]}
    return Instance(f"i-{action}", "iba", "u1", "Writing", TASK, {**base, **payload}, {})


def passage(i: int, text: str | None = None) -> Passage:
    text = text or f"User: message number {i} about topic {i}\nAssistant: Noted."
    return Passage(f"u1-t{i:05d}", 0, text, 1.0 / (i + 1))


class FakeRetriever:
    """Query -> passages by a rule; records every call."""

    def __init__(self, rule: Callable[[str, int], list[Passage]] | None = None):
        self.rule = rule or (lambda q, k: [passage(abs(hash(q)) % 900 + j) for j in range(k)])
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, owner: str, query: str, k: int) -> list[Passage]:
        self.calls.append((query, k))
        return self.rule(query, k)


def docs_for(passages: list[Passage]) -> list[Document]:
    return [Document("u1", p.doc_id, p.text, timestamp=f"2025-02-{i % 28 + 1:02d}T10:00:00")
            for i, p in enumerate(passages)]


def stage_of(messages: list[dict[str, Any]]) -> str:
    """Which IBA-Agent stage sent this prompt (by its system prompt / instruction)."""
    sys_msg, prompt = messages[0]["content"], messages[-1]["content"]
    if "search queries" in sys_msg:
        return "expand"
    if "past messages as evidence" in sys_msg:
        return "salience"
    if "infer a user's preferences" in sys_msg:
        return "extract"
    if "plan how" in sys_msg:
        return "plan"
    if "control a personal assistant" in sys_msg:
        return "controller"
    return "synthesize"


def responder(**overrides: str | None | Callable[[list[dict[str, Any]]], str | None]) -> Callable:
    """Default answers per stage; a stage's override may be text, None (a failed request) or a function."""
    answers: dict[str, Any] = {
        "expand": json.dumps({f: f"{f} of my paper writing" for f in FACETS}),
        "salience": '{"relevant": true, "signals": ["correction", "statement"]}',  # 3 + 3 + 2 = 8
        "extract": '{"preferences": ["sparse citations", "writes with we"]}',
        "plan": "- use we\n- cite only key works",
        "synthesize": "We introduce soil radar [1].",
        "controller": "done",
    }
    answers.update(overrides)

    def answer(messages: list[dict[str, Any]]) -> str | None:
        a = answers[stage_of(messages)]
        return a(messages) if callable(a) else a

    return answer


def run(agent: IbaAgent, inst: Instance, llm: Any, retriever: FakeRetriever | None = None,
        documents: list[Document] | None = None):
    retriever = retriever or FakeRetriever()
    ctx = AgentContext(llm=llm, retrieve=retriever, documents=lambda u: list(documents or []))
    return asyncio.run(agent.act(inst, ctx, 0, "iba-agent"))


def steps(out) -> list[str]:
    return [t["step"] for t in out.trace]


def entry(out, step: str) -> dict[str, Any]:
    return next(t for t in out.trace if t["step"] == step)


def prompts_of(llm: ScriptedChat, stage: str) -> list[str]:
    return [c["messages"][-1]["content"] for c in llm.calls if stage_of(c["messages"]) == stage]
