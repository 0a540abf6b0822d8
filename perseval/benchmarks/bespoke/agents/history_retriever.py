"""History retrieval systems of Table 5: a bi-encoder (the experiment's retriever) ranks the user's sessions
with the raw query, a CoT expansion or a pseudo-history (HyDE-style) expansion of it (Table 23).

The expanded text is appended to the query. The output's `parsed["ranking"]` lists the top `depth`
distinct sessions (chunks are merged into their session by their best score).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.bespoke.context import top_sessions
from perseval.benchmarks.bespoke.history_retrieval import cot_messages, pseudo_history_messages
from perseval.kernel.capabilities import Capability
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent
from perseval.llm.usage import trace_fields


class HistoryRetrieverParams(Params):
    expansion: Literal["none", "cot", "pseudo_history"] = "none"
    depth: int = Field(20, ge=1)  # sessions ranked (nDCG@20 needs 20)
    max_tokens: int = Field(160, ge=1)


@register_agent("bespoke.history_retriever")
class HistoryRetriever(Agent[HistoryRetrieverParams]):
    benchmarks = ("bespoke-history",)

    def requires(self) -> frozenset[str]:
        return frozenset({Capability.RETRIEVE} | ({Capability.LLM} if self.params.expansion != "none" else set()))

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        p = self.params
        trace: list[dict[str, Any]] = []
        query = instance.query
        if p.expansion != "none":
            assert ctx.llm is not None
            messages = cot_messages(query) if p.expansion == "cot" else pseudo_history_messages(query)
            res = await ctx.llm.chat(messages, max_tokens=p.max_tokens, repeat=repeat)
            trace.append({"step": "expand", "expansion": p.expansion, "text": res.text, **trace_fields(res)})
            if res.status != "ok":
                return AgentOutput(instance.instance_id, name, repeat, "", status="failed", error=res.error,
                                   trace=trace)
            query = f"{query}\n{res.text.strip()}"
        assert ctx.retrieve is not None
        top = top_sessions(await ctx.retrieve(instance.user_id, query, 8 * p.depth), p.depth)
        ranking = [h.doc_id for h in top]
        trace.append({"step": "retrieve", "query": query, "ranking": ranking, "scores": [h.score for h in top]})
        return AgentOutput(instance.instance_id, name, repeat, query, parsed={"ranking": ranking}, trace=trace)
