"""longlamp.rule: every LongLaMP task's metrics by rule against the user's own text (perseval.metrics.rouge).

Per row: `rouge1` and `rougeL` (rouge-score's F-measures, x100), `score`, the headline on 0-100 (ROUGE-1, as
LaMP's generation tasks), and `valid` (100 for a non-empty answer). An invalid output (an empty answer) is
the agent's miss, scored 0, never left unscored; a failed output never reaches a judge.
"""
from __future__ import annotations

from perseval.benchmarks.longlamp.views import LongLampGold
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.judges.base import Judge, JudgeBinding
from perseval.kernel.registry import register_judge
from perseval.metrics.rouge import rouge1, rouge_l

METRICS = ("score", "rouge1", "rougeL", "valid")


def values(gold: str, answer: str | None) -> dict[str, float]:
    """A row's metric values: an answer's ROUGE against the gold, 0 for no answer."""
    r1, rl = (100.0 * rouge1(answer, gold), 100.0 * rouge_l(answer, gold)) if answer else (0.0, 0.0)
    return {"score": r1, "rouge1": r1, "rougeL": rl, "valid": 100.0 * (answer is not None)}


def answered(output: AgentOutput) -> str | None:
    """The answer of an ok output; None for an invalid one."""
    value = (output.parsed or {}).get("answer") if output.status == "ok" else None
    return value if isinstance(value, str) and value else None


@register_judge("longlamp.rule")
class LongLampRuleJudge(Judge):
    benchmark = "longlamp"
    item = "metric"
    metrics = METRICS
    uses_llm = False

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        gold, answer = LongLampGold.of(instance).output, answered(output)
        feedback = (f"answered {len(answer.split())} words, gold {len(gold.split())}" if answer is not None
                    else f"no usable answer ({output.status}{': ' + output.error if output.error else ''}); scored 0")
        return [self.judgment(instance, output, binding, metric, value, "scored", "", feedback)
                for metric, value in values(gold, answer).items()]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        return self.metric_scores(instance, output, judgments)
