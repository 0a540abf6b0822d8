"""Plain RAG, for any benchmark with a request format: top-k history passages concatenated with the task.

With `top_k: 0` it is the no-history agent (it then needs no retrieval at all).
The benchmark decides the prompt and reads the answer (perseval.agents.contract.RequestFormat);
for IBA-Bench this is the paper's RAG baseline (C.1: top-3 passages with the task).
"""
from __future__ import annotations

from typing import Any, Callable

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.agents.contract import Answer
from perseval.kernel.capabilities import Capability
from perseval.llm.base import ChatResult
from perseval.llm.usage import prompt_record, trace_fields
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance, Passage
from perseval.kernel.registry import register_agent


class RagParams(Params):
    top_k: int = Field(3, ge=0)  # passages retrieved with the task text; 0 = no history
    max_tokens: int = Field(192, ge=1)  # completion budget of a free-text answer
    json_max_tokens: int = Field(64, ge=1)  # completion budget of a structured (JSON) answer
    passage_chars: int | None = Field(600, ge=1)  # characters kept of each passage in the prompt; None: all


def whole(passages: list[Passage]) -> int:
    """A per-passage character budget that cuts none of `passages` (`passage_chars: null`)."""
    return max((len(p.text) for p in passages), default=1)


def passage_trace(query: str, k: int, passages: list[Passage]) -> dict[str, Any]:
    return {"step": "retrieve", "query": query, "k": k,
            "passages": [{"doc_id": p.doc_id, "chunk_id": p.chunk_id, "score": p.score, "text": p.text}
                         for p in passages]}


def context_trace(passages: list[Passage], chars: int) -> dict[str, Any]:
    """The passages that went into the final prompt (each cut to `chars`): what evidence attribution reads."""
    return {"step": "context", "chars": chars,
            "passages": [{"doc_id": p.doc_id, "chunk_id": p.chunk_id, "score": p.score} for p in passages]}


def generate_trace(result: ChatResult, messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"step": "generate", **trace_fields(result), **(prompt_record(messages) if messages else {})}


def answered_output(instance: Instance, name: str, repeat: int, result: ChatResult, trace: list[dict[str, Any]],
                    extract: Callable[[Instance, str], Answer],
                    messages: list[dict[str, Any]] | None = None) -> AgentOutput:
    """The output of one answering request: failed (the request failed after retries), invalid (the answer
    could not be read by `extract`) or ok, with its parsed answer, trace (the prompt `messages` in it) and
    token counts."""
    out = AgentOutput(instance.instance_id, name, repeat, result.text, trace=[*trace, generate_trace(result, messages)],
                      prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens)
    if result.status == "failed":
        out.status, out.error = "failed", result.error
        return out
    answer = extract(instance, result.text)
    out.parsed = answer.parsed
    if answer.problem:
        out.status, out.error = "invalid", answer.problem
    return out


@register_agent("rag")
class RagAgent(Agent[RagParams]):
    needs = frozenset({Capability.LLM, Capability.REQUEST_FORMAT, Capability.RETRIEVE})

    def requires(self) -> frozenset[str]:
        return self.needs if self.params.top_k > 0 else self.needs - {Capability.RETRIEVE}

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None and ctx.request_format is not None  # required, so the runner provides them
        k = self.params.top_k
        passages = await ctx.retrieve(instance.user_id, instance.query, k) if k > 0 and ctx.retrieve else []
        prompt = ctx.request_format.prompt(instance, passages, self.params.passage_chars or whole(passages))
        budget = self.params.json_max_tokens if prompt.json_schema else self.params.max_tokens
        result = await ctx.llm.chat(prompt.messages, json_schema=prompt.json_schema, max_tokens=budget, repeat=repeat)
        trace = [passage_trace(instance.query, k, passages), context_trace(passages, self.params.passage_chars)]
        return answered_output(instance, name, repeat, result, trace, ctx.request_format.extract, prompt.messages)
