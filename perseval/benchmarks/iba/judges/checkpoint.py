"""IBA-Bench Generate(text) and QA probes: one binary LLM judgment per hidden checkpoint (A.2, C.2).

Instance score = 100 x the mean of the scored checkpoints; QA probes are scored
under their own metric, `qa_score`, so a cell's `score` is task execution only.
"""
from __future__ import annotations

import asyncio

from pydantic import Field

from perseval.benchmarks.iba.answers import is_api_task
from perseval.benchmarks.iba.prompts import MAX_RESPONSE_CHARS, judge_messages
from perseval.benchmarks.iba.qa import QA_ACTION
from perseval.judges.base import Judge, JudgeBinding, scored_values
from perseval.judges.binary import binary_verdict
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.iba.views import ActionPayload, IbaGold

QA_METRIC = "qa_score"


class CheckpointParams(Params):
    max_tokens: int | None = None  # None: sized from the verdict schema (perseval.judges.base.answer_budget)
    # characters of the response the judge sees; None: the whole response (the paper clips nothing)
    response_chars: int | None = Field(MAX_RESPONSE_CHARS, ge=1)
    key_compatible = {"response_chars": MAX_RESPONSE_CHARS}  # the clip every judge had before it was a param


def instance_metric(instance: Instance) -> str:
    return QA_METRIC if ActionPayload.of(instance).action_type == QA_ACTION else "score"


def mean_score(judge: Judge, instance: Instance, output: AgentOutput, judgments: list[Judgment],
               metric: str) -> list[InstanceScore]:
    """100 x mean of the scored items; None when none could be scored; unscored/failed are counted."""
    scored = scored_values(judgments)
    value = 100.0 * sum(scored) / len(scored) if scored else None
    return [judge.instance_score(instance, output, judgments, metric, value, len(judgments),
                                 len(judgments) - len(scored))]


@register_judge("iba.checkpoint")
class CheckpointJudge(Judge[CheckpointParams]):
    benchmark = "iba"
    item = "checkpoint"
    metrics = ("score", QA_METRIC)

    def applies(self, instance: Instance) -> bool:
        return not is_api_task(instance)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        checkpoints = IbaGold.of(instance).checkpoints
        return list(await asyncio.gather(*(self._one(instance, output, cp, binding) for cp in checkpoints)))

    async def _one(self, instance: Instance, output: AgentOutput, checkpoint: dict, binding: JudgeBinding) -> Judgment:
        if output.status != "ok":
            # invalid: the agent answered unusably, a miss without spending a judge call (a failed output
            # never reaches a judge: perseval.judges.base)
            return self.judgment(instance, output, binding, checkpoint["id"], 0.0,
                                 feedback=f"agent output {output.status}; not sent to the judge")
        assert binding.model is not None  # an LLM judge kind: the plan binds a model
        v = await binary_verdict(binding.model, judge_messages(instance.query, output.text, checkpoint["statement"],
                                                              self.params.response_chars),
                                 quoted=[output.text], repeat=binding.repeat, max_tokens=self.params.max_tokens,
                                 reasons=binding.reasons)
        return self.from_verdict(instance, output, binding, checkpoint["id"], v)

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        return mean_score(self, instance, output, judgments, instance_metric(instance))
