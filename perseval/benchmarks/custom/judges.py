"""The judges of a user's own data: the checkpoint and slot judges IBA-Bench registers too
(perseval.benchmarks.action_judges) and the ranking judge APeB registers too (perseval.benchmarks.ranking_judge),
registered for `custom`, each on its instance type.

Nothing is re-implemented: the instance payload and gold have the shapes these judges
read (docs/custom-data-layout.md), so a subclass only names the benchmark and says
which instances it applies to.
"""
from __future__ import annotations

from perseval.benchmarks.action_judges import CheckpointJudge, SlotJudge
from perseval.benchmarks.custom.answers import API, RANKING, TEXT, action_type
from perseval.benchmarks.ranking_judge import RankingJudge
from perseval.core.instances import Instance
from perseval.kernel.registry import register_judge


@register_judge("custom.checkpoint")
class CustomCheckpointJudge(CheckpointJudge):
    """Free text: one binary LLM judgment per checkpoint; score = 100 x the mean."""

    benchmark = "custom"
    metrics = ("score",)

    def applies(self, instance: Instance) -> bool:
        return action_type(instance) == TEXT


@register_judge("custom.slots")
class CustomSlotJudge(SlotJudge):
    """API calls: each gold slot 0/1 by rule; score = 100 x the mean."""

    benchmark = "custom"

    def applies(self, instance: Instance) -> bool:
        return action_type(instance) == API


@register_judge("custom.ranking")
class CustomRankingJudge(RankingJudge):
    """Rankings: Hit@1 (the cell's headline), Hit@5 and reciprocal rank of the gold candidate."""

    benchmark = "custom"

    def applies(self, instance: Instance) -> bool:
        return action_type(instance) == RANKING
