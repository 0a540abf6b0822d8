"""persona_mem.oracle: answers the correct option from the gold; the ceiling of the rule score (100)."""
from __future__ import annotations

import json

from perseval.agents.base import Agent, AgentContext
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent
from perseval.benchmarks.persona_mem.views import PersonaMemGold


@register_agent("persona_mem.oracle")
class PersonaMemOracle(Agent):
    benchmarks = ("persona_mem",)
    needs = frozenset()
    reads_gold = True

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        letter = PersonaMemGold.of(instance).answer
        return AgentOutput(instance.instance_id, name, repeat, json.dumps({"answer": letter}), parsed={"choice": letter})
