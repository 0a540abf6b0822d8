"""prefeval.classification: the classification task by rule, `mcq_accuracy` 100 when the chosen option is
the one that follows the preference, else 0; an output without a single option is a scored miss (and
`valid` 0), never unscored."""
from __future__ import annotations

from perseval.benchmarks.prefeval.answers import is_classification, read_choice
from perseval.judges.base import Judge, JudgeBinding
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.prefeval.views import PrefEvalGold

METRICS = ("mcq_accuracy", "valid")


@register_judge("prefeval.classification")
class ClassificationJudge(Judge):
    benchmark = "prefeval"
    item = "choice"
    metrics = METRICS
    uses_llm = False

    def applies(self, instance: Instance) -> bool:
        return is_classification(instance)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        gold = PrefEvalGold.of(instance).answer
        choice = None
        if output.status == "ok":
            parsed = (output.parsed or {}).get("choice")
            choice = parsed if isinstance(parsed, str) and parsed else read_choice(output.text)
        values = {"mcq_accuracy": 100.0 * (choice == gold), "valid": 100.0 * (choice is not None)}
        feedback = f"chose {choice}, preference-following option {gold}" if choice else \
            f"no usable option ({output.status}); a miss"
        return [self.judgment(instance, output, binding, m, values[m], "scored", choice or output.text[:200], feedback)
                for m in METRICS]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        by_item = {j.item_id: j for j in judgments}
        return [self.instance_score(instance, output, judgments, m, by_item[m].score if m in by_item else None,
                                    int(m in by_item), 0) for m in METRICS]
