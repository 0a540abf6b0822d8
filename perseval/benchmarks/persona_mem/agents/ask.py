"""One multiple-choice request and its output: the answer read by the request format's one extraction."""
from __future__ import annotations

from typing import Any

from perseval.agents.rag import answered_output
from perseval.benchmarks.persona_mem.answers import ANSWER_SCHEMA, extract
from perseval.llm.base import ChatModel
from perseval.core.instances import AgentOutput, Instance


async def ask_choice(llm: ChatModel, messages: list[dict[str, Any]], instance: Instance, name: str, repeat: int,
                     max_tokens: int, trace: list[dict[str, Any]]) -> AgentOutput:
    result = await llm.chat(messages, json_schema=ANSWER_SCHEMA, max_tokens=max_tokens, repeat=repeat)
    return answered_output(instance, name, repeat, result, trace, extract, messages)
