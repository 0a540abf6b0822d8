"""prefeval.oracle: on the classification task, the option that follows the preference (from the gold): the
ceiling of the rule score. A generation task has no gold response, so its output is invalid (a miss), never
a made-up answer."""
from __future__ import annotations

import json

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.prefeval.answers import is_classification
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent
from perseval.benchmarks.prefeval.views import PrefEvalGold


@register_agent("prefeval.oracle")
class PrefEvalOracle(Agent):
    benchmarks = ("prefeval",)
    needs = frozenset()
    reads_gold = True

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        if not is_classification(instance):
            return AgentOutput(instance.instance_id, name, repeat, "", status="invalid",
                               error="the oracle has no gold response for a generation task")
        letter = PrefEvalGold.of(instance).answer
        return AgentOutput(instance.instance_id, name, repeat, json.dumps({"choice": letter}), parsed={"choice": letter})
