"""The judges of IBA-Bench's two action types (perseval.benchmarks.actions), which IBA-Bench and a user's own
data both register under their own names (iba.checkpoint and iba.slots; custom.checkpoint and custom.slots):

  CheckpointJudge  Generate(text): one binary LLM judgment per hidden checkpoint (IBA-Bench A.2, C.2)
  SlotJudge        CallAPI(params): each personalization-relevant slot 0/1 by rule (A.2); task-fixed slots are
                   not in the gold, so they are never scored

Instance score = 100 x the mean of the scored items. The checkpoint judge's request is written for perseval:
the response is quoted as data, the verdict asked first and its reason after it.
"""
from __future__ import annotations

import asyncio

from pydantic import Field

from perseval.benchmarks.actions import is_api_task, normalize_slot, submitted_slots
from perseval.benchmarks.views import ActionGold
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.judges.base import Judge, JudgeBinding, scored_values
from perseval.judges.binary import binary_verdict
from perseval.judges.quoting import data_rule, quote
from perseval.kernel.params import Params

JUDGE_INSTRUCTION = "You grade whether a response meets one hidden user requirement. Judge only that requirement."
JUDGE_TEMPLATE = ("Task:\n{task}\n\n{response}\n\nRequirement:\n{requirement}\n\n"
                  'Does the response meet the requirement? Answer {{"verdict": true or false, "reason": '
                  '"<one sentence>"}}.')
MAX_RESPONSE_CHARS = 6000  # the judges' default clip: keeps a judge prompt inside a small model's context

_JUDGE_SYSTEM = JUDGE_INSTRUCTION + " " + data_rule("response") + " Reply with JSON only."


def clip_response(response: str, max_chars: int | None) -> str:
    """The response as the judge sees it: cut to `max_chars` (marked), or whole when None."""
    if max_chars is not None and len(response) > max_chars:
        return response[:max_chars] + " [...]"
    return response


def judge_messages(task: str, response: str, requirement: str,
                   max_chars: int | None = MAX_RESPONSE_CHARS) -> list[dict[str, str]]:
    """One binary checkpoint judgment: does `response` to `task` satisfy `requirement`? The response is
    quoted as data (cut to `max_chars`); the verdict is asked first, the reason after it."""
    response = clip_response(response, max_chars)
    user = JUDGE_TEMPLATE.format(task=task, response=quote("response", response), requirement=requirement)
    return [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": user}]


def mean_score(judge: Judge, instance: Instance, output: AgentOutput, judgments: list[Judgment],
               metric: str) -> list[InstanceScore]:
    """100 x mean of the scored items; None when none could be scored; unscored/failed are counted."""
    scored = scored_values(judgments)
    value = 100.0 * sum(scored) / len(scored) if scored else None
    return [judge.instance_score(instance, output, judgments, metric, value, len(judgments),
                                 len(judgments) - len(scored))]


class CheckpointParams(Params):
    max_tokens: int | None = None  # None: sized from the verdict schema (perseval.judges.base.answer_budget)
    # characters of the response the judge sees; None: the whole response (the paper clips nothing)
    response_chars: int | None = Field(MAX_RESPONSE_CHARS, ge=1)
    key_compatible = {"response_chars": MAX_RESPONSE_CHARS}  # the clip every judge had before it was a param


class CheckpointJudge(Judge[CheckpointParams]):
    """One binary LLM judgment per hidden checkpoint of a free-text action; registered by each benchmark."""

    item = "checkpoint"
    metrics = ("score",)

    def applies(self, instance: Instance) -> bool:
        return not is_api_task(instance)

    def metric(self, instance: Instance) -> str:
        """The metric an instance's checkpoints are scored under."""
        return "score"

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        checkpoints = ActionGold.of(instance).checkpoints
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
        return mean_score(self, instance, output, judgments, self.metric(instance))


class SlotJudge(Judge):
    """Each gold slot of an API call 0/1 by rule (normalised exact match); registered by each benchmark."""

    item = "slot"
    metrics = ("score",)
    uses_llm = False

    def applies(self, instance: Instance) -> bool:
        return is_api_task(instance)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        gold = ActionGold.of(instance).slots
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
