"""Rule judge of bespoke-meta: the evaluator's score per criterion, next to the human score.

Metrics per instance: each criterion's evaluator score x20 (0..100, as Table 4 reports), and
`score_error`, the mean absolute difference from the human scores x20. An unreadable score is unscored.
Table 3's correlations are computed across instances by the benchmark's analysis.
"""
from __future__ import annotations

from statistics import mean

from perseval.benchmarks.bespoke.layout import CRITERIA
from perseval.judges.base import Judge, JudgeBinding
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.bespoke.views import MetaGold


@register_judge("bespoke.evaluator_scores")
class EvaluatorScores(Judge):
    benchmark = "bespoke-meta"
    item = "evaluator_score"
    metrics = ("score_error", *CRITERIA)
    uses_llm = False

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        parsed = output.parsed or {}
        scores, feedback = parsed.get("scores") or {}, parsed.get("feedback") or {}
        out = []
        for name in CRITERIA:
            value = scores.get(name)
            if output.status != "ok":
                out.append(self.judgment(instance, output, binding, name, None, "failed", output.text, output.error))
            elif value is None:
                out.append(self.judgment(instance, output, binding, name, None, "unscored", output.text))
            else:
                out.append(self.judgment(instance, output, binding, name, float(value), feedback=feedback.get(name, "")))
        return out

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        human = MetaGold.of(instance).human
        by_name = {j.item_id: j for j in judgments}
        rows, errors = [], []
        for name in CRITERIA:
            j = by_name.get(name)
            value = j.score if j is not None and j.status == "scored" else None
            rows.append(self.instance_score(instance, output, judgments, name, None if value is None else 20 * value,
                                            1, int(value is None)))
            if value is not None:
                errors.append(abs(value - human[name].score))
        rows.insert(0, self.instance_score(instance, output, judgments, "score_error",
                                           20 * mean(errors) if errors else None, len(CRITERIA),
                                           len(CRITERIA) - len(errors)))
        return rows
