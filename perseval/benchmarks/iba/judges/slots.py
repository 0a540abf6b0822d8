"""IBA-Bench CallAPI: each personalization-relevant slot scored 0/1 by rule (A.2), the shared slot judge
(perseval.benchmarks.action_judges) registered as `iba.slots`; task-fixed slots are not in the gold, so they
are never scored. Instance score = 100 x the mean over slots."""
from __future__ import annotations

from perseval.benchmarks.action_judges import SlotJudge
from perseval.kernel.registry import register_judge


@register_judge("iba.slots")
class IbaSlotJudge(SlotJudge):
    benchmark = "iba"
