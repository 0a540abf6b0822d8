"""A new judge for an existing benchmark, as a plugin: APeB's rubric analysis grades trajectories; this
rule stand-in grades one rubric line, intent inference - does the top-ranked product belong to the
category the shopper was searching in? One module (this) plus one YAML; no benchmark, plan or flow edit."""
from __future__ import annotations

from perseval.judges.base import Judge, JudgeBinding
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge


@register_judge("apeb.intent-match")
class IntentMatchJudge(Judge):
    benchmark = "apeb"
    item = "intent"
    metrics = ("intent_match",)
    uses_llm = False

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        ranking = (output.parsed or {}).get("ranking") or []
        cards = {c["id"]: c for c in instance.payload["candidates"]}
        top = cards.get(ranking[0]) if ranking else None
        if top is None:
            return [self.judgment(instance, output, binding, "top", 0.0, feedback="no ranking")]
        return [self.judgment(instance, output, binding, "top", float(top.get("category") == instance.group),
                              raw=ranking[0])]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        value = 100.0 * judgments[0].score if judgments and judgments[0].score is not None else None
        return [self.instance_score(instance, output, judgments, "intent_match", value, len(judgments), 0)]
