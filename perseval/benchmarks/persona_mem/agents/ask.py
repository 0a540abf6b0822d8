"""One multiple-choice request and its output: the answer read by the task format's one extraction."""
from __future__ import annotations

from typing import Any

from perseval.agents.rag import generate_trace
from perseval.benchmarks.persona_mem.answers import ANSWER_SCHEMA, extract
from perseval.llm.base import ChatModel
from perseval.core.records import AgentOutput, Instance


async def ask_choice(llm: ChatModel, messages: list[dict[str, Any]], instance: Instance, name: str, repeat: int,
                     max_tokens: int, trace: list[dict[str, Any]]) -> AgentOutput:
    result = await llm.chat(messages, json_schema=ANSWER_SCHEMA, max_tokens=max_tokens, repeat=repeat)
    out = AgentOutput(instance.instance_id, name, repeat, result.text, trace=[*trace, generate_trace(result)],
                      prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens)
    if result.status == "failed":
        out.status, out.error = "failed", result.error
        return out
    answer = extract(instance, result.text)
    out.parsed = answer.parsed
    if answer.problem:
        out.status, out.error = "invalid", answer.problem
    return out
