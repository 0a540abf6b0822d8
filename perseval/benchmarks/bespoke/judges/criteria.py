"""Bespoke's personalization judge E_p (section 3.4, C.1): with the user's rubric, rated examples and gold
need, a 1..5 score and feedback per criterion (need alignment, content depth, tone, explanation style),
reported x20 on 0..100; `personalization` is the mean of the criteria that could be scored.

An invalid or empty response satisfies no criterion: every criterion is scored 1 (the floor) without a
judge call, rather than left unscored, which would drop it from the means and flatter a flaky agent. A
failed output (the request failed) never reaches a judge (perseval.judges.base).
"""
from __future__ import annotations

from statistics import mean

from pydantic import Field

from perseval.benchmarks.bespoke.judges.recall import NO_RESPONSE, has_response
from perseval.benchmarks.bespoke.layout import CRITERIA
from perseval.benchmarks.bespoke.prompts import CRITERIA_SCHEMA, criteria_messages, parse_criteria
from perseval.judges.base import Judge, JudgeBinding, answer_budget, scored_values
from perseval.params import Params
from perseval.records import AgentOutput, Instance, InstanceScore, Judgment
from perseval.registry import register_judge


class CriteriaParams(Params):
    # sized for the embedded 4096-token judge; raise them for large-context judges
    response_chars: int = Field(3000, ge=1)
    rubric_chars: int = Field(2000, ge=1)
    shot_chars: int = Field(500, ge=1)  # each example response shown to E_p
    max_shots: int = Field(3, ge=0)
    max_tokens: int | None = Field(None, ge=1)  # None: sized from CRITERIA_SCHEMA


@register_judge("bespoke.criteria")
class CriteriaJudge(Judge):
    Params = CriteriaParams
    params: CriteriaParams
    benchmark = "bespoke"
    item = "criterion"
    metrics = ("personalization", *CRITERIA)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        if not has_response(output):
            return [self.judgment(instance, output, binding, name, 1.0, feedback=NO_RESPONSE) for name in CRITERIA]
        assert binding.model is not None
        gold = instance.gold
        messages = criteria_messages(instance.query, gold["need"], gold["rubric"], gold["shots"], output.text,
                                     self.params.model_dump())
        res = await binding.model.chat(messages, json_schema=CRITERIA_SCHEMA, repeat=binding.repeat,
                                       max_tokens=self.params.max_tokens or answer_budget(CRITERIA_SCHEMA))
        if res.status != "ok":
            return [self.judgment(instance, output, binding, name, None, "failed", res.text, res.error)
                    for name in CRITERIA]
        parsed = parse_criteria(res.text, quoted=[output.text])
        out = []
        for name in CRITERIA:
            score, feedback = parsed[name]
            status = "scored" if score is not None else "unscored"  # unparseable: kept as raw text, never 0
            out.append(self.judgment(instance, output, binding, name, None if score is None else float(score),
                                     status, res.text, feedback))
        return out

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
        return scores
