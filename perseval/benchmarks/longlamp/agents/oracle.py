"""longlamp.oracle: answers the user's own text (the gold output); the ceiling of every LongLaMP metric (ROUGE
100): it checks the scoring, not a model."""
from __future__ import annotations

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.longlamp.views import LongLampGold
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent


@register_agent("longlamp.oracle")
class LongLampOracle(Agent):
    benchmarks = ("longlamp",)
    needs = frozenset()
    reads_gold = True

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        gold = LongLampGold.of(instance).output
        return AgentOutput(instance.instance_id, name, repeat, gold, parsed={"answer": gold})
