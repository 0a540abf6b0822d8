"""The conversation a PrefEval question is asked in, and the one request every PrefEval agent ends with.

The official layout: the turns that reveal the preference, then the first `inter_turns` unrelated turns,
then the question. The preference turns are the user's documents of the instance's form (under the
swapped-history control: another user's, of the same form); the inter-turns are the corpus documents every
user shares. `context_tokens` clips a conversation that overflows a small model's window by dropping the
oldest inter-turns (never the preference turns), and the trace says how many.
"""
from __future__ import annotations

from typing import Any

from perseval.agents.rag import answered_output
from perseval.benchmarks.prefeval.answers import extract, schema
from perseval.core.instances import CORPUS_OWNER, AgentOutput, Document, Instance
from perseval.llm.base import ChatModel
from perseval.benchmarks.prefeval.views import PrefEvalPayload

CHARS_PER_TOKEN = 4
Message = dict[str, str]


def preference_turns(instance: Instance, documents: list[Document]) -> list[Message]:
    """The messages of the instance's preference document (else the owner's first of the same form)."""
    form = PrefEvalPayload.of(instance).form
    mine = [d for d in documents if d.meta.get("form") == form]
    exact = [d for d in mine if d.doc_id == PrefEvalPayload.of(instance).pref_doc]
    doc = (exact or mine or [None])[0]
    return list(doc.meta["messages"]) if doc is not None else []


def inter_turns(instance: Instance, corpus: list[Document]) -> list[list[Message]]:
    n = PrefEvalPayload.of(instance).inter_turns
    turns = sorted((d for d in corpus if d.meta.get("turn", n) < n), key=lambda d: d.meta["turn"])
    return [list(d.meta["messages"]) for d in turns]


def conversation(instance: Instance, documents: Any, context_tokens: int | None) -> tuple[list[Message], dict[str, Any]]:
    """(messages before the question, trace step) from the run's `documents(owner)`."""
    pref = preference_turns(instance, documents(instance.user_id))
    fillers = inter_turns(instance, documents(CORPUS_OWNER))
    dropped = 0
    if context_tokens is not None:
        budget = context_tokens * CHARS_PER_TOKEN - sum(len(m["content"]) for m in pref)
        while fillers and sum(len(m["content"]) for t in fillers for m in t) > budget:
            fillers.pop(0)
            dropped += 1
    messages = [*pref, *(m for t in fillers for m in t)]
    step = {"step": "context", "preference_messages": len(pref), "inter_turns": len(fillers),
            "inter_turns_dropped": dropped, "chars": sum(len(m["content"]) for m in messages)}
    return messages, step


async def answer(llm: ChatModel, messages: list[Message], instance: Instance, name: str, repeat: int,
                 max_tokens: int, choice_max_tokens: int, trace: list[dict[str, Any]]) -> AgentOutput:
    shape = schema(instance)
    result = await llm.chat(messages, json_schema=shape, max_tokens=choice_max_tokens if shape else max_tokens,
                            repeat=repeat)
    return answered_output(instance, name, repeat, result, trace, extract, messages)
