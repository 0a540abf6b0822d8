"""apeb.oracle: reads the gold purchase and ranks it first; the upper bound of the rule scores."""
from __future__ import annotations

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.apeb.answers import ranking_output
from perseval.benchmarks.rankings import candidate_ids
from perseval.benchmarks.apeb.views import ApebGold
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent


@register_agent("apeb.oracle")
class APeBOracle(Agent):
    benchmarks = ("apeb",)
    needs = frozenset()
    reads_gold = True

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        ids = candidate_ids(instance)
        purchased = ApebGold.of(instance).purchased
        if purchased not in ids:
            return AgentOutput(instance.instance_id, name, repeat, text="", status="invalid",
                               error="the oracle was not given a gold purchase among the candidates")
        return ranking_output(instance, name, repeat, [purchased, *[i for i in ids if i != purchased]])
