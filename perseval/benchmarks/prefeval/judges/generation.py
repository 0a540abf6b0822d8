"""prefeval.generation: the paper's generation evaluation, an LLM judge of four checks per response.

Judgments (item `check`): acknowledges, violates, helpful, and hallucinates when the response acknowledges
a preference. Metrics on 0..100, per response: `accuracy` (preference following: none of the four error
types), each error type's indicator, and the acknowledgement rate. A response the judge could not check
fully is unscored on every metric (its judgments keep the raw answers), never counted as a pass or a fail.
"""
from __future__ import annotations

import asyncio

from pydantic import Field

from perseval.benchmarks.prefeval.answers import is_classification
from perseval.benchmarks.prefeval.errors import ERROR_TYPES, Verdicts, classify
from perseval.benchmarks.prefeval.prompts import check_messages
from perseval.judges.base import Judge, JudgeBinding
from perseval.judges.binary import binary_verdict
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.prefeval.views import PrefEvalGold

METRICS = ("accuracy", *ERROR_TYPES, "acknowledgement")
FIRST = ("acknowledges", "violates", "helpful")


class GenerationParams(Params):
    max_tokens: int | None = None  # None: sized from the verdict schema
    response_chars: int | None = Field(2000, ge=1)  # characters of the response the judge sees; None: all


@register_judge("prefeval.generation")
class GenerationJudge(Judge[GenerationParams]):
    benchmark = "prefeval"
    item = "check"
    metrics = METRICS

    def applies(self, instance: Instance) -> bool:
        return not is_classification(instance)

    async def _check(self, check: str, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> Judgment:
        assert binding.model is not None
        messages = check_messages(check, instance.query, output.text, PrefEvalGold.of(instance).preference,
                                  self.params.response_chars)
        v = await binary_verdict(binding.model, messages, quoted=[output.text], repeat=binding.repeat,
                                 max_tokens=self.params.max_tokens, reasons=binding.reasons)
        return self.from_verdict(instance, output, binding, check, v)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        if output.status != "ok":  # invalid: unhelpful by construction, no judge call spent
            feedback = f"agent output {output.status}; not sent to the judge"
            return [self.judgment(instance, output, binding, "helpful", 0.0, feedback=feedback),
                    self.judgment(instance, output, binding, "acknowledges", 0.0, feedback=feedback),
                    self.judgment(instance, output, binding, "violates", 0.0, feedback=feedback)]
        first = list(await asyncio.gather(*(self._check(c, instance, output, binding) for c in FIRST)))
        if first[0].status == "scored" and first[0].score:
            first.append(await self._check("hallucinates", instance, output, binding))
        return first

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        def verdict(check: str) -> bool | None:
            j = next((j for j in judgments if j.item_id == check), None)
            return None if j is None or j.status != "scored" or j.score is None else j.score >= 0.5

        flags = classify(Verdicts(verdict("acknowledges"), verdict("hallucinates"), verdict("violates"),
                                  verdict("helpful")))
        unscored = sum(1 for j in judgments if j.status != "scored")
        values = {} if flags is None else {"accuracy": flags["follows"], "acknowledgement": flags["acknowledges"],
                                           **{e: flags[e] for e in ERROR_TYPES}}
        return [self.instance_score(instance, output, judgments, m, 100.0 * values[m] if flags else None,
                                    len(judgments), unscored) for m in METRICS]
