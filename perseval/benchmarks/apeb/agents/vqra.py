"""apeb.vqra: Vague Query Refinement Agent - refine the query with the user's history first, then rank.

Step 1 (refine): one call reads the shopper's history and their (possibly vague) query and writes an
explicit product query (product type, brand, price level, features) as {"refined_query": "..."}.
Step 2 (rank): the direct ranking call, or the ReAct loop (`ranker: react`), with the refined query shown
beside the shopper's own words. A refinement that cannot be read falls back to the original query (and
says so in the trace); a failed request fails the output.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.apeb.agents.common import HistoryParams, ask_ranking, count, history_lines, history_needs
from perseval.benchmarks.apeb.agents.react import TOOL_NEEDS, ReactParams, run_react
from perseval.benchmarks.apeb.prompts import REFINE_SCHEMA, refine_messages
from perseval.benchmarks.rankings import ranking_messages, ranking_size
from perseval.kernel.capabilities import Capability
from perseval.core.parsing import extract_object
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent
from perseval.benchmarks.views import RankingPayload
from perseval.llm.usage import trace_fields


class VqraParams(HistoryParams):
    refine_max_tokens: int = Field(48, ge=1)
    ranker: Literal["direct", "react"] = "direct"
    react: ReactParams = ReactParams()  # the ReAct settings when ranker is react


@register_agent("apeb.vqra")
class APeBVqra(Agent[VqraParams]):
    benchmarks = ("apeb",)

    def requires(self) -> frozenset[str]:
        # refinement always reads the history, whatever `use_history` says about the ranking prompt
        refine = history_needs(self.params.model_copy(update={"use_history": True}))
        rank = TOOL_NEEDS if self.params.ranker == "react" else history_needs(self.params)
        return frozenset({Capability.LLM, *refine, *rank})

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None
        p = self.params
        out = AgentOutput(instance.instance_id, name, repeat, text="")
        history = await history_lines(instance, ctx, p.model_copy(update={"use_history": True}), instance.query)
        result = await ctx.llm.chat(refine_messages(instance.query, history or []), json_schema=REFINE_SCHEMA,
                                    max_tokens=p.refine_max_tokens, repeat=repeat)
        count(out, result)
        if result.status != "ok":
            out.status, out.error, out.text = "failed", result.error or "request failed", result.text
            out.trace.append({"step": "refine", **trace_fields(result), "error": result.error})
            return out
        refined = str((extract_object(result.text) or {}).get("refined_query") or "").strip()
        out.trace.append({"step": "refine", **trace_fields(result), "query": instance.query,
                          "history_lines": len(history or []),
                          "text": result.text, "refined_query": refined or None,
                          **({} if refined else {"fallback": "unreadable refinement; ranking with the query"})})
        if p.ranker == "react":
            return await run_react(instance, ctx, p.react, repeat, out, refined=refined or None)
        shown = history if p.use_history else None
        messages = ranking_messages(instance.query, RankingPayload.of(instance).candidates, shown, ranking_size(instance),
                                    refined=refined or None)
        return await ask_ranking(ctx.llm, messages, instance, out, max_tokens=p.max_tokens, repeat=repeat)
