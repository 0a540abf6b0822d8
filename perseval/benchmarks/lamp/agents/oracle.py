"""lamp.oracle: answers the gold output; the ceiling of every LaMP metric (checks the scoring, not a model)."""
from __future__ import annotations

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.lamp.views import LampGold
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent


@register_agent("lamp.oracle")
class LampOracle(Agent):
    benchmarks = ("lamp",)
    needs = frozenset()
    reads_gold = True

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        gold = LampGold.of(instance).output
        return AgentOutput(instance.instance_id, name, repeat, gold, parsed={"answer": gold})
