"""IBA-Bench Generate(text) and QA probes: one binary LLM judgment per hidden checkpoint (A.2, C.2), the shared
checkpoint judge (perseval.benchmarks.action_judges) registered as `iba.checkpoint`.

Instance score = 100 x the mean of the scored checkpoints; QA probes are scored
under their own metric, `qa_score`, so a cell's `score` is task execution only.
"""
from __future__ import annotations

from perseval.benchmarks.action_judges import CheckpointJudge
from perseval.benchmarks.iba.qa import QA_ACTION, QA_METRIC
from perseval.benchmarks.views import ActionPayload
from perseval.core.instances import Instance
from perseval.kernel.registry import register_judge


@register_judge("iba.checkpoint")
class IbaCheckpointJudge(CheckpointJudge):
    benchmark = "iba"
    metrics = ("score", QA_METRIC)

    def metric(self, instance: Instance) -> str:
        return QA_METRIC if ActionPayload.of(instance).action_type == QA_ACTION else "score"
