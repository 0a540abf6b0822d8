"""persona_mem.choice: the multiple-choice accuracy, by rule (100 for the correct option, else 0).

The option is the one the agent's output names (`parsed.choice`, read by the request format's one
extraction). An invalid output (no single option) is the agent's miss: scored 0, and counted in `valid`
(100 for a usable answer, 0 otherwise), never left unscored. A failed output never reaches a judge.
"""
from __future__ import annotations

from perseval.benchmarks.persona_mem.answers import read_letter
from perseval.judges.base import Judge, JudgeBinding
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.persona_mem.views import PersonaMemGold

METRICS = ("accuracy", "valid")


def chosen(output: AgentOutput) -> str | None:
    """The option an output chose: its parsed choice, else what its text names (an ok output only)."""
    if output.status != "ok":
        return None
    parsed = (output.parsed or {}).get("choice")
    return parsed if isinstance(parsed, str) and parsed else read_letter(output.text)


@register_judge("persona_mem.choice")
class ChoiceJudge(Judge):
    benchmark = "persona_mem"
    item = "choice"
    metrics = METRICS
    uses_llm = False

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        gold, choice = PersonaMemGold.of(instance).answer, chosen(output)
        if choice is None:
            feedback = f"no usable option ({output.status}{': ' + output.error if output.error else ''}); a miss"
            values = {"accuracy": 0.0, "valid": 0.0}
        else:
            feedback = f"chose ({choice}), correct ({gold})"
            values = {"accuracy": 100.0 * (choice == gold), "valid": 100.0}
        return [self.judgment(instance, output, binding, m, values[m], "scored", choice or output.text[:200], feedback)
                for m in METRICS]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        by_item = {j.item_id: j for j in judgments}
        out = []
        for m in METRICS:
            j = by_item.get(m)
            ok = j is not None and j.status == "scored"
            out.append(self.instance_score(instance, output, judgments, m, j.score if ok else None,
                                           int(j is not None), int(j is not None and not ok)))
        return out
