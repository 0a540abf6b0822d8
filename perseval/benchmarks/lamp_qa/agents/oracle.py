"""lamp_qa.oracle: the backbone answers with the question's rubric aspects as the points to cover.

The release's plan-conditioned prompt (PlanPers) fed the gold plan instead of a planner's: what a perfect
planner gives. It reads the gold (the aspects) and no profile, so it gets no swapped-history run. Unlike
LaMP's oracle it is no ceiling: the backbone still writes the answer, and the judge grades it; it checks that
the judge rewards an answer written to the aspects.
"""
from __future__ import annotations

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.agents.rag import answered_output
from perseval.benchmarks.lamp_qa.answers import extract
from perseval.benchmarks.lamp_qa.prompts import answer_messages
from perseval.benchmarks.lamp_qa.views import LampQaGold, LampQaPayload
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.capabilities import Capability
from perseval.kernel.params import Params
from perseval.kernel.registry import register_agent


class OracleParams(Params):
    max_tokens: int = Field(512, ge=1)  # of the answer


@register_agent("lamp_qa.oracle")
class LampQaOracle(Agent[OracleParams]):
    benchmarks = ("lamp_qa",)
    needs = frozenset({Capability.LLM})
    reads_gold = True

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None
        plan = [a.aspect for a in LampQaGold.of(instance).aspects]
        messages = answer_messages(LampQaPayload.of(instance).question, [], plan)
        result = await ctx.llm.chat(messages, max_tokens=self.params.max_tokens, repeat=repeat)
        return answered_output(instance, name, repeat, result, [{"step": "plan", "aspects": plan}],
                               lambda _, text: extract(text), messages)
