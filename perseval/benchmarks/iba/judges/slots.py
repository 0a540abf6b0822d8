"""IBA-Bench CallAPI: each personalization-relevant slot scored 0/1 by rule (A.2); task-fixed slots are
not in the gold, so they are never scored. Instance score = 100 x the mean over slots."""
from __future__ import annotations

from perseval.benchmarks.iba.answers import is_api_task, normalize_slot, submitted_slots
from perseval.benchmarks.iba.judges.checkpoint import mean_score
from perseval.judges.base import Judge, JudgeBinding
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.iba.views import IbaGold


@register_judge("iba.slots")
class SlotJudge(Judge):
    benchmark = "iba"
    item = "slot"
    metrics = ("score",)
    uses_llm = False

    def applies(self, instance: Instance) -> bool:
        return is_api_task(instance)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        gold = IbaGold.of(instance).slots
        submitted = submitted_slots(instance, output)
        out = []
        for name, expected in gold.items():
            if submitted is None:  # invalid output: a miss (failed outputs never reach a judge)
                score, feedback, raw = 0.0, f"agent output {output.status}: no API call to score", ""
            elif name not in submitted:
                score, feedback, raw = 0.0, "slot missing", ""
            else:
                raw = str(submitted[name])
                score = float(normalize_slot(submitted[name]) == normalize_slot(expected))
                feedback = "match" if score else f"expected {expected!r}"
            out.append(self.judgment(instance, output, binding, name, score, "scored", raw, feedback))
        return out

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        return mean_score(self, instance, output, judgments, "score")
