"""apeb.direct: single-step LLM ranking of APeB candidates, with or without the user's history.

One call asks for {"ranking": [5 ids]} under a JSON schema. The benchmark's extraction drops unknown and
repeated ids (recorded in the trace); when fewer than five valid ids remain, one correction turn asks for
the missing ones; if that still fails the output is marked invalid with its raw text, never silently accepted.
"""
from __future__ import annotations

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.apeb.agents.common import HistoryParams, ask_ranking, history_lines, history_needs
from perseval.benchmarks.rankings import ranking_messages, ranking_size
from perseval.kernel.capabilities import Capability
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent
from perseval.benchmarks.views import RankingPayload


@register_agent("apeb.direct")
class APeBDirect(Agent[HistoryParams]):
    benchmarks = ("apeb",)

    def requires(self) -> frozenset[str]:
        return frozenset({Capability.LLM, *history_needs(self.params)})

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None
        out = AgentOutput(instance.instance_id, name, repeat, text="")
        history = await history_lines(instance, ctx, self.params, instance.query)
        messages = ranking_messages(instance.query, RankingPayload.of(instance).candidates, history, ranking_size(instance))
        return await ask_ranking(ctx.llm, messages, instance, out, max_tokens=self.params.max_tokens, repeat=repeat)
