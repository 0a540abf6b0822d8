"""Bespoke's personalization judge E_p (section 3.4, C.1): with the user's rubric, rated examples and gold
need, a 1..5 score and feedback per criterion (need alignment, content depth, tone, explanation style),
reported x20 on 0..100; `personalization` is the mean of the criteria that could be scored. Table 4's
headline "Avg." (the four criteria and recall) is the benchmark's combined metric `avg`.

What E_p sees, and its variants, are in perseval.benchmarks.bespoke.evaluation. When a token budget clips
the prompt, one extra judgment (item `clipped`, score = characters cut) records it, and `clipped_chars` is
reported beside the criteria.

An invalid or empty response satisfies no criterion: every criterion is scored 1 (the floor) without a
judge call, rather than left unscored, which would drop it from the means and flatter a flaky agent. A
failed output (the request failed) never reaches a judge (perseval.judges.base).
"""
from __future__ import annotations

from statistics import mean

from perseval.benchmarks.bespoke.evaluation import EvaluatorParams, evaluate
from perseval.benchmarks.bespoke.judges.recall import NO_RESPONSE, clip_judgment, clip_score, has_response
from perseval.benchmarks.bespoke.layout import CRITERIA
from perseval.judges.base import Judge, JudgeBinding, scored_values
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge


@register_judge("bespoke.criteria")
class CriteriaJudge(Judge[EvaluatorParams]):
    benchmark = "bespoke"
    item = "criterion"
    metrics = ("personalization", *CRITERIA)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        if not has_response(output):
            return [self.judgment(instance, output, binding, name, 1.0, feedback=NO_RESPONSE) for name in CRITERIA]
        assert binding.model is not None
        ev = await evaluate(binding.model, self.params, instance.gold, instance.query, output.text,
                            repeat=binding.repeat)
        if ev.status != "ok":
            return [self.judgment(instance, output, binding, name, None, "failed", ev.raw, ev.error, ev.prompt)
                    for name in CRITERIA]
        out = []
        for name in CRITERIA:
            score = ev.scores[name]
            status = "scored" if score is not None else "unscored"  # unparseable: kept as raw text, never 0
            out.append(self.judgment(instance, output, binding, name, None if score is None else float(score),
                                     status, ev.raw, ev.feedback[name], ev.prompt))
        return out + clip_judgment(self, instance, output, binding, ev.clip.total, ev.clip.describe())

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        scores, per_criterion = [], []
        for name in CRITERIA:
            items = [j for j in judgments if j.item_id == name]
            values = scored_values(items)
            value = 20.0 * mean(values) if values else None  # 1..5 Likert reported x20, as in the paper
            per_criterion.append(value)
            scores.append(self.instance_score(instance, output, judgments, name, value, len(items),
                                              len(items) - len(values)))
        rated = [v for v in per_criterion if v is not None]
        scores.insert(0, self.instance_score(instance, output, judgments, "personalization",
                                             mean(rated) if rated else None, len(CRITERIA), len(CRITERIA) - len(rated)))
        return scores + clip_score(self, instance, output, judgments)
