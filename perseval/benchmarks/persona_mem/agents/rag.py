"""persona_mem.rag: the top-k messages of the user's sessions retrieved with the question, then the question.

The generic `rag` agent retrieves over the whole indexed history, which here would show the model messages
from after the question (a PersonaMem question sees its context only up to its end index). This agent
retrieves `top_k x overfetch` and keeps the best `top_k` from before the question; `top_k: 0` is the
no-history baseline (no retrieval at all).
"""
from __future__ import annotations

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.agents.rag import context_trace, passage_trace
from perseval.benchmarks.persona_mem.agents.ask import ask_choice
from perseval.benchmarks.persona_mem.agents.context import before_question
from perseval.benchmarks.persona_mem.answers import question_message
from perseval.kernel.capabilities import Capability
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent


class SessionRagParams(Params):
    top_k: int = Field(5, ge=0)  # messages kept in the prompt; 0: no history
    overfetch: int = Field(4, ge=1)  # retrieve top_k x overfetch, then drop those after the question
    passage_chars: int | None = Field(600, ge=1)  # characters kept of each message; None: all
    max_tokens: int = Field(16, ge=1)


@register_agent("persona_mem.rag")
class SessionRagAgent(Agent[SessionRagParams]):
    benchmarks = ("persona_mem",)
    needs = frozenset({Capability.LLM, Capability.RETRIEVE})

    def requires(self) -> frozenset[str]:
        return self.needs if self.params.top_k > 0 else frozenset({Capability.LLM})

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None
        k = self.params.top_k
        fetched = await ctx.retrieve(instance.user_id, instance.query, k * self.params.overfetch) \
            if k and ctx.retrieve else []
        passages = before_question(instance, fetched)[:k]
        chars = self.params.passage_chars or max((len(p.text) for p in passages), default=1)
        trace = [passage_trace(instance.query, k * self.params.overfetch, fetched),
                 context_trace(passages, chars)]
        messages = [question_message(instance, [p.text[:chars] for p in passages])]
        return await ask_choice(ctx.llm, messages, instance, name, repeat, self.params.max_tokens, trace)
