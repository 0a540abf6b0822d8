"""The meta-judge of section 4.1 (Table 18): does the evaluator's feedback on a criterion say what the
human's feedback says (same priorities, same key issues and praise, similar severity)?

One binary judgment per criterion, with the query, gold need, response and rubric as context. Feedback
accuracy = 100 x the share judged equivalent. An unreadable meta-judgment is unscored; a criterion for
which the evaluator produced no feedback (failed or unreadable) is scored 0: there is nothing to agree.
"""
from __future__ import annotations

import asyncio
from statistics import mean

from pydantic import Field

from perseval.benchmarks.bespoke.layout import CRITERIA, CRITERION_TITLES
from perseval.judges.base import Judge, JudgeBinding, scored_values
from perseval.judges.binary import binary_verdict
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.bespoke.views import MetaGold


class FeedbackMatchParams(Params):
    max_tokens: int = Field(64, ge=1)


def feedback_messages(criterion: str, query: str, need: str, response: str, rubric: str, human: str,
                      generated: str) -> list[dict[str, str]]:
    title = CRITERION_TITLES[criterion].lower()
    user = (f"Query: {query}\nGold information need: {need}\n\n<response>\n{response}\n</response>\n\n"
            f"<rubric>\n{rubric}\n</rubric>\n\nHuman feedback on {title} (reference):\n<human>\n{human}\n</human>\n\n"
            f"Generated feedback on {title}:\n<generated>\n{generated}\n</generated>\n\n"
            f"Does the generated feedback judge the response's {title} the way the human did: the same main "
            "priorities and focus, the key problems and praise the human stressed, a similar severity or leniency, "
            "grounded in the query, need and response? Small differences and extra nuance are fine if they do "
            "not change the human's intent.\n"
            'Reply with JSON only: {"verdict": true or false, "reason": "<one short sentence>"}')
    return [{"role": "system", "content": "You check whether generated feedback emulates a human evaluator."},
            {"role": "user", "content": user}]


@register_judge("bespoke.feedback_match")
class FeedbackMatchJudge(Judge[FeedbackMatchParams]):
    benchmark = "bespoke-meta"
    item = "feedback"
    metrics = ("feedback_accuracy", *(f"feedback.{c}" for c in CRITERIA))

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        return list(await asyncio.gather(*(self._one(instance, output, binding, c) for c in CRITERIA)))

    async def _one(self, instance: Instance, output: AgentOutput, binding: JudgeBinding, criterion: str) -> Judgment:
        generated = ((output.parsed or {}).get("feedback") or {}).get(criterion, "") if output.status == "ok" else ""
        if not generated.strip():
            return self.judgment(instance, output, binding, criterion, 0.0, feedback="the evaluator gave no feedback")
        assert binding.model is not None
        g = MetaGold.of(instance)
        rubric = (output.parsed or {}).get("rubric") or g.rubric or ""
        v = await binary_verdict(binding.model, feedback_messages(criterion, instance.query, g.need, g.response,
                                                                  rubric, g.human[criterion].feedback, generated),
                                 repeat=binding.repeat, max_tokens=self.params.max_tokens, reasons=binding.reasons)
        return self.from_verdict(instance, output, binding, criterion, v)

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        values = scored_values(judgments)
        out = [self.instance_score(instance, output, judgments, "feedback_accuracy",
                                   100 * mean(values) if values else None, len(judgments), len(judgments) - len(values))]
        for c in CRITERIA:
            items = [j for j in judgments if j.item_id == c]
            v = scored_values(items)
            out.append(self.instance_score(instance, output, items, f"feedback.{c}", 100 * v[0] if v else None,
                                           len(items), len(items) - len(v)))
        return out
