"""The evaluator under meta-evaluation (Table 3): E_p, in one of its variants, rates a meta-test response.

Its output carries the scores and feedback per criterion (`parsed`), the judge's raw answer as text, and
the rubric it used; an unreadable criterion is None there (the rule judge then marks it unscored).
"""
from __future__ import annotations

from dataclasses import asdict

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.bespoke.evaluation import EvaluatorParams, evaluate
from perseval.benchmarks.bespoke.views import MetaGold
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent


@register_agent("bespoke.evaluator")
class BespokeEvaluator(Agent[EvaluatorParams]):
    benchmarks = ("bespoke-meta",)
    reads_gold = True  # it needs the rubric, the R-J examples, the gold need and the response to rate

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None
        ev = await evaluate(ctx.llm, self.params, instance.gold, instance.query, MetaGold.of(instance).response,
                            repeat=repeat)
        out = AgentOutput(instance.instance_id, name, repeat, ev.raw,
                          parsed={"scores": ev.scores, "feedback": ev.feedback, "rubric": ev.rubric},
                          trace=[{"step": "evaluate", "variant": self.params.variant, "clip": asdict(ev.clip),
                                  "rubric": ev.rubric}])
        if ev.status != "ok":
            out.status, out.error = "failed", ev.error
        return out
