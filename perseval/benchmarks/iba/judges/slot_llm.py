"""IBA-Bench CallAPI slots judged by an LLM judge, as in the paper (C.2, A.2): one binary judgment per
personalization-relevant slot, given the task and the user's preference for that slot; task-fixed slots are
not in the gold, so they are never judged. Instance score = 100 x the mean over slots, under `score`, so an
LLM judge's tables cover CallAPI scenarios with its own judgments (Tables 6-8 differ there, Table 9's std
is its own).

The rule scorer (`iba.slots`, exact match) stays the deterministic default; this kind runs only for a judge
whose params name it (`params: {iba.slot_llm: {}}` on a judge without `kind`, or in an experiment's
`overrides:`), and `slot_judge_agreement` (perseval.benchmarks.iba.slot_agreement) reports how often the two
agree. A slot missing from the call, or an output that is not a usable call, is a miss without a judge call.
"""
from __future__ import annotations

import asyncio
from typing import Any

from perseval.benchmarks.action_judges import mean_score
from perseval.benchmarks.actions import is_api_task, submitted_slots
from perseval.benchmarks.iba.prompts import slot_judge_messages
from perseval.benchmarks.iba.qa import dimension_name, known_scenario, slot_dimensions, value_label
from perseval.judges.base import Judge, JudgeBinding
from perseval.judges.binary import binary_verdict
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.iba.views import IbaGold
from perseval.benchmarks.views import ActionPayload, ScenarioPayload


class SlotLlmParams(Params):
    max_tokens: int | None = None  # None: sized from the verdict schema (perseval.judges.base.answer_budget)


def preference_text(instance: Instance, slot: str, value: Any) -> str:
    """The user's preference behind a gold slot, in the taxonomy's words: 'Heat level: not spicy (not_spicy)'."""
    scenario = known_scenario(ScenarioPayload.of(instance).scenario)
    dim = slot_dimensions(scenario).get(slot, slot)
    label = value_label(scenario, dim, str(value))
    dynamic = any(p.get("dimension") == dim and p.get("dynamic") for p in IbaGold.of(instance).preferences)
    shown = f"{label} ({value})" if label else f"{value}"
    return f"{dimension_name(scenario, dim)}: the user {'now ' if dynamic else ''}prefers {shown}"


def _allowed(instance: Instance, slot: str) -> list[str]:
    for s in (ActionPayload.of(instance).api or {}).get("slots", []):
        if s["name"] == slot:
            return [str(v) for v in s.get("values") or []]
    return []


@register_judge("iba.slot_llm")
class SlotLlmJudge(Judge[SlotLlmParams]):
    benchmark = "iba"
    item = "slot"
    metrics = ("score",)

    def applies(self, instance: Instance) -> bool:
        return is_api_task(instance)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        submitted = submitted_slots(instance, output)
        gold = IbaGold.of(instance).slots
        return list(await asyncio.gather(*(self._one(instance, output, binding, submitted, name, value)
                                           for name, value in gold.items())))

    async def _one(self, instance: Instance, output: AgentOutput, binding: JudgeBinding,
                   submitted: dict[str, Any] | None, slot: str, expected: Any) -> Judgment:
        if submitted is None:
            return self.judgment(instance, output, binding, slot, 0.0,
                                 feedback=f"agent output {output.status}: no API call; not sent to the judge")
        if slot not in submitted:
            return self.judgment(instance, output, binding, slot, 0.0, feedback="slot missing; not sent to the judge")
        assert binding.model is not None  # an LLM judge kind: the plan binds a model
        value = str(submitted[slot])
        api = ActionPayload.of(instance).api or {}
        messages = slot_judge_messages(instance.query, api.get("name", ""), slot, _allowed(instance, slot), value,
                                       preference_text(instance, slot, expected))
        v = await binary_verdict(binding.model, messages, quoted=[value], repeat=binding.repeat,
                                 max_tokens=self.params.max_tokens, reasons=binding.reasons)
        return self.from_verdict(instance, output, binding, slot, v)

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        return mean_score(self, instance, output, judgments, "score")
