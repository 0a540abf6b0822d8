"""The contract of a judge: a registered component that judges one kind of item of one benchmark.

A judge writes atomic judgments (a checkpoint, a slot, a claim, a criterion, a
rank) and turns the judgments of one output into instance-level metrics. An LLM
judge is a model bound to the judge role (`JudgeBinding`); a rule judge has no
model. The `judge` column of every table is the name of the binding that
really produced the number.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from perseval.llm.base import ChatModel
from perseval.params import Configurable
from perseval.records import AgentOutput, Instance, InstanceScore, Judgment, JudgmentStatus


@dataclass
class JudgeBinding:
    """A judge's name in the tables, its model (None for rule judges) and the judge repeat."""

    name: str
    model: ChatModel | None = None
    repeat: int = 0


class Judge(Configurable, ABC):
    kind: ClassVar[str]  # set by @register_judge
    benchmark: ClassVar[str]  # the benchmark whose items it judges
    item: ClassVar[str]  # Judgment.kind of the judgments it writes
    metrics: ClassVar[tuple[str, ...]]  # instance metrics it scores, its headline first
    uses_llm: ClassVar[bool] = True

    def applies(self, instance: Instance) -> bool:
        """Whether this judge has items on `instance` (e.g. slots only on CallAPI tasks)."""
        return True

    @abstractmethod
    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        """Atomic judgments of one output. Unparseable judge answers: status 'unscored', raw text kept."""

    @abstractmethod
    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        """Instance-level metric values from this judge's judgments of one (output, judge repeat)."""

    # --- row helpers: every judgment and score of a judge carries the same identity ------------------

    def judgment(self, instance: Instance, output: AgentOutput, binding: JudgeBinding, item_id: str,
                 score: float | None, status: JudgmentStatus = "scored", raw: str = "", feedback: str = "") -> Judgment:
        return Judgment(instance.instance_id, output.agent, output.repeat, binding.name, binding.repeat, item_id,
                        self.item, score, status, raw, feedback)

    @staticmethod
    def instance_score(instance: Instance, output: AgentOutput, judgments: list[Judgment], metric: str,
                       value: float | None, n_items: int, n_unscored: int) -> InstanceScore:
        judge, judge_repeat = (judgments[0].judge, judgments[0].judge_repeat) if judgments else ("", 0)
        return InstanceScore(instance.instance_id, output.agent, output.repeat, judge, judge_repeat, instance.group,
                             metric, value, n_items, n_unscored)


def scored_values(judgments: list[Judgment]) -> list[float]:
    """The scores of the judgments that were scored (unscored and failed ones are left out, never 0)."""
    return [j.score for j in judgments if j.status == "scored" and j.score is not None]
