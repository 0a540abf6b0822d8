"""Bespoke recall (section 3.4): one binary judgment per gold claim; recall = 100 x the share present.

An unscored claim is left out of the share, never counted absent. An invalid or empty
response conveys no claim: every claim is scored 0 without a judge call. A failed output
(the request failed) never reaches a judge (perseval.judges.base).
"""
from __future__ import annotations

import asyncio
from statistics import mean

from pydantic import Field

from perseval.benchmarks.bespoke.prompts import claim_messages
from perseval.judges.base import Judge, JudgeBinding, scored_values
from perseval.judges.binary import binary_verdict
from perseval.params import Params
from perseval.records import AgentOutput, Instance, InstanceScore, Judgment
from perseval.registry import register_judge

NO_RESPONSE = "agent produced no response"


def has_response(output: AgentOutput) -> bool:
    return output.status == "ok" and bool(output.text.strip())


class RecallParams(Params):
    # sized for the embedded 4096-token judge; raise them for large-context judges
    response_chars: int = Field(3000, ge=1)  # response text shown to the judge
    max_tokens: int | None = Field(None, ge=1)  # None: sized from the verdict schema


@register_judge("bespoke.recall")
class RecallJudge(Judge):
    Params = RecallParams
    params: RecallParams
    benchmark = "bespoke"
    item = "claim"
    metrics = ("recall",)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        claims = instance.gold["claims"]
        if not has_response(output):
            return [self.judgment(instance, output, binding, f"claim-{k}", 0.0, feedback=NO_RESPONSE)
                    for k in range(len(claims))]
        return list(await asyncio.gather(*(self._one(instance, output, binding, k, c) for k, c in enumerate(claims))))

    async def _one(self, instance: Instance, output: AgentOutput, binding: JudgeBinding, k: int, claim: str) -> Judgment:
        assert binding.model is not None
        v = await binary_verdict(binding.model, claim_messages(claim, output.text, self.params.response_chars),
                                 quoted=[output.text], repeat=binding.repeat, max_tokens=self.params.max_tokens)
        return self.judgment(instance, output, binding, f"claim-{k}", v.score, v.status, v.raw,  # type: ignore[arg-type]
                             v.feedback)

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        verdicts = scored_values(judgments)
        return [self.instance_score(instance, output, judgments, "recall", 100.0 * mean(verdicts) if verdicts else None,
                                    len(judgments), len(judgments) - len(verdicts))]
