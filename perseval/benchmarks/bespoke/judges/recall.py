"""Bespoke recall (section 3.4, C.1): one binary judgment per gold claim ("contained without
contradiction"); recall = 100 x the share of claims judged present.

An unscored claim (the judge's answer could not be read) is left out of the share and counted in
`n_unscored`, never counted absent; the official evaluator counts it absent, so the analysis shows the
count beside recall for a reader who wants to compare. A failed or empty response conveys no claim:
every claim is scored 0 without a judge call (a failed output, whose request
failed, never reaches a judge: perseval.judges.base). The response is shown whole unless `prompt_budget_tokens`
forces a cut, which is then recorded (item `clipped`, metric `clipped_chars`).
"""
from __future__ import annotations

import asyncio
from statistics import mean

from pydantic import Field

from perseval.benchmarks.bespoke.evaluation import CHARS_PER_TOKEN
from perseval.benchmarks.bespoke.prompts import claim_messages
from perseval.judges.base import Judge, JudgeBinding, scored_values
from perseval.judges.binary import binary_verdict
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.bespoke.views import BespokeGold

NO_RESPONSE = "agent produced no response"
CLIPPED = "clipped"  # item id of the judgment that records a prompt cut to a token budget


def has_response(output: AgentOutput) -> bool:
    return output.status == "ok" and bool(output.text.strip())


def clip_judgment(judge: Judge, instance: Instance, output: AgentOutput, binding: JudgeBinding, chars: int,
                  note: str) -> list[Judgment]:
    """The record of a prompt clipped to a token budget (none when nothing was cut)."""
    return [judge.judgment(instance, output, binding, CLIPPED, float(chars), feedback=note)] if chars else []


def clip_score(judge: Judge, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
    clipped = [j for j in judgments if j.item_id == CLIPPED]
    if not clipped:
        return []
    return [judge.instance_score(instance, output, judgments, "clipped_chars", sum(j.score or 0 for j in clipped),
                                 len(clipped), 0)]


class RecallParams(Params):
    prompt_budget_tokens: int | None = Field(None, ge=64)  # None: the whole response, as the official evaluator
    max_tokens: int = Field(64, ge=1)


@register_judge("bespoke.recall")
class RecallJudge(Judge[RecallParams]):
    benchmark = "bespoke"
    item = "claim"
    metrics = ("recall",)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        claims = BespokeGold.of(instance).claims
        if not has_response(output):
            return [self.judgment(instance, output, binding, f"claim-{k}", 0.0, feedback=NO_RESPONSE)
                    for k in range(len(claims))]
        response, cut = self._fit(output.text, max(len(c) for c in claims))
        judged = await asyncio.gather(*(self._one(instance, output, binding, k, c, response)
                                        for k, c in enumerate(claims)))
        note = f"prompt clipped to the token budget: response {cut} chars" if cut else ""
        return [*judged, *clip_judgment(self, instance, output, binding, cut, note)]

    def _fit(self, response: str, claim_chars: int) -> tuple[str, int]:
        """The response cut to the budget (with room for the instructions and the longest claim), and the cut."""
        if self.params.prompt_budget_tokens is None:
            return response, 0
        room = max(self.params.prompt_budget_tokens * CHARS_PER_TOKEN - claim_chars - 400, 400)
        return (response, 0) if len(response) <= room else (response[:room], len(response) - room)

    async def _one(self, instance: Instance, output: AgentOutput, binding: JudgeBinding, k: int, claim: str,
                   response: str) -> Judgment:
        assert binding.model is not None
        v = await binary_verdict(binding.model, claim_messages(claim, response), quoted=[output.text],
                                 repeat=binding.repeat, max_tokens=self.params.max_tokens, reasons=binding.reasons)
        return self.from_verdict(instance, output, binding, f"claim-{k}", v)

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        claims = [j for j in judgments if j.item_id != CLIPPED]
        verdicts = scored_values(claims)
        return [self.instance_score(instance, output, claims, "recall", 100.0 * mean(verdicts) if verdicts else None,
                                    len(claims), len(claims) - len(verdicts)),
                *clip_score(self, instance, output, judgments)]
