"""lamp.rule: every LaMP task's metrics by rule against the gold output (perseval.benchmarks.lamp.metrics,
perseval.metrics.rouge).

Per instance: `score`, the headline on 0-100 where higher is better (accuracy for LaMP-1/2; ROUGE-1 for
LaMP-4..7; for LaMP-3, 100 - 25 x the absolute error, which maps the 0-4 error of a 1-5 rating onto 0-100),
and the paper's metrics: `accuracy` (LaMP-1/2), `abs_error` and `squared_error` (LaMP-3, whose means are MAE
and, under a square root, RMSE), `rouge1` and `rougeL` (LaMP-4..7, x100); and `valid` (100 for a usable
answer). An invalid output is the agent's miss, scored as the official evaluation scores an answer outside
the label set, never left unscored; a failed output never reaches a judge. The accuracy judgment's `raw`
is the label answered ("" for none): the analysis reads it for the macro F1.
"""
from __future__ import annotations

from perseval.benchmarks.lamp.answers import spec
from perseval.benchmarks.lamp.metrics import rating_value
from perseval.benchmarks.lamp.views import LampGold
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.judges.base import Judge, JudgeBinding
from perseval.kernel.registry import register_judge
from perseval.metrics.rouge import rouge1, rouge_l

METRICS = ("score", "accuracy", "abs_error", "squared_error", "rouge1", "rougeL", "valid")


def answered(output: AgentOutput) -> str | None:
    """The answer of an ok output (its parsed label or text); None for an invalid one."""
    value = (output.parsed or {}).get("answer") if output.status == "ok" else None
    return value if isinstance(value, str) else None


def values(kind: str, gold: str, answer: str | None) -> dict[str, float]:
    """The instance's metric values for a task of `kind`."""
    valid = 100.0 * (answer is not None)
    if kind == "classification":
        hit = 100.0 * (answer == gold)
        return {"score": hit, "accuracy": hit, "valid": valid}
    if kind == "rating":
        error = abs(rating_value(answer, float(gold)) - float(gold))
        return {"score": 100.0 - 25.0 * error, "abs_error": error, "squared_error": error ** 2, "valid": valid}
    r1, rl = (100.0 * rouge1(answer, gold), 100.0 * rouge_l(answer, gold)) if answer else (0.0, 0.0)
    return {"score": r1, "rouge1": r1, "rougeL": rl, "valid": valid}


@register_judge("lamp.rule")
class LampRuleJudge(Judge):
    benchmark = "lamp"
    item = "metric"
    metrics = METRICS
    uses_llm = False

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        gold, answer = LampGold.of(instance).output, answered(output)
        task = spec(instance)
        feedback = (f"answered {answer!r:.80}, gold {gold!r:.80}" if answer is not None
                    else f"no usable answer ({output.status}{': ' + output.error if output.error else ''}); a miss")
        return [self.judgment(instance, output, binding, metric, value, "scored", answer or "", feedback)
                for metric, value in values(task.kind, gold, answer).items()]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        return self.metric_scores(instance, output, judgments)
