"""The contract of a judge: a registered component that judges one kind of item of one benchmark.

A judge writes atomic judgments (a checkpoint, a slot, a claim, a criterion, a
rank) and turns the judgments of one output into instance-level metrics. An LLM
judge is a model bound to the judge role (`JudgeBinding`); a rule judge has no
model. The `judge` column of every table is the name of the binding that
really produced the number.

A `failed` agent output (the request failed after retries) is not an answer:
the runner never hands it to a judge, so it has no judgment and no score and is
counted beside the score instead. An `invalid` output (the agent answered,
unusably) is judged, and each judge scores it as a miss.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from perseval.llm.base import ChatModel
from perseval.kernel.params import Configurable, P
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment, JudgmentStatus


@dataclass
class Verdict:
    """One binary verdict as perseval.judges.binary reads it from a judge model's answer."""

    score: float | None
    status: str  # scored | unscored | failed
    raw: str
    feedback: str
    prompt: dict[str, Any] | None = None  # the request as a trace keeps it (llm.usage.prompt_record)
    p_true: float | None = None  # P(true) read from the verdict token's probabilities (judges.probability)
    method: str = ""  # logprobs: the verdict is p_true >= threshold; text: the sampled word (no probabilities)


@dataclass
class JudgeBinding:
    """A judge's name in the tables, its model (None for rule judges) and the judge repeat."""

    name: str
    model: ChatModel | None = None
    repeat: int = 0
    threshold: float = 0.5  # a verdict read as a probability passes at P(true) >= threshold (judge YAML)
    reasons: bool = True  # a binary verdict comes with its one-sentence reason (judge YAML `reasons`)


class Judge(Configurable[P], ABC):
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
                 score: float | None, status: JudgmentStatus = "scored", raw: str = "", feedback: str = "",
                 prompt: dict[str, Any] | None = None, p_true: float | None = None, method: str = "") -> Judgment:
        return Judgment(instance.instance_id, output.agent, output.repeat, binding.name, binding.repeat, item_id,
                        self.item, score, status, raw, feedback, prompt, p_true, method)

    def from_verdict(self, instance: Instance, output: AgentOutput, binding: JudgeBinding, item_id: str,
                     v: Verdict) -> Judgment:
        """The judgment of one binary verdict, with the request it answered; a verdict read as a probability
        passes at the binding's threshold."""
        score = v.score if v.p_true is None else float(v.p_true >= binding.threshold)
        return self.judgment(instance, output, binding, item_id, score, v.status, v.raw,  # type: ignore[arg-type]
                             v.feedback, v.prompt, v.p_true, v.method)

    @staticmethod
    def instance_score(instance: Instance, output: AgentOutput, judgments: list[Judgment], metric: str,
                       value: float | None, n_items: int, n_unscored: int) -> InstanceScore:
        judge, judge_repeat = (judgments[0].judge, judgments[0].judge_repeat) if judgments else ("", 0)
        return InstanceScore(instance.instance_id, output.agent, output.repeat, judge, judge_repeat, instance.group,
                             metric, value, n_items, n_unscored)

    def metric_scores(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        """One score per judgment, its item the metric (a rule judge that judges each metric once): the
        judgment's value, or none (one item unscored) where it is not scored."""
        return [self.instance_score(instance, output, judgments, j.item_id, j.score if j.status == "scored" else None,
                                    1, int(j.status != "scored")) for j in judgments]


def at_threshold(judgments: list[Judgment], threshold: float | None, why: str = "") -> list[Judgment]:
    """`judgments` with every verdict read from P(true) (method `logprobs`) read again as P(true) >= `threshold`;
    with no threshold (`why` says why) such a verdict is unscored. Text and rule verdicts stay as they are."""
    def again(j: Judgment) -> Judgment:
        if j.method != "logprobs" or j.p_true is None or j.status != "scored":
            return j
        if threshold is None:
            return replace(j, score=None, status="unscored", feedback=why)
        return replace(j, score=float(j.p_true >= threshold))

    return [again(j) for j in judgments]


def scored_values(judgments: list[Judgment]) -> list[float]:
    """The scores of the judgments that were scored (unscored and failed ones are left out, never 0)."""
    return [j.score for j in judgments if j.status == "scored" and j.score is not None]


# Tokens one JSON member costs besides its value: the quoted key, colon, comma and the bit of whitespace
# a grammar lets the model put between members.
_MEMBER_TOKENS = 4
_UNBOUNDED_STRING_TOKENS = 96


def answer_budget(schema: dict[str, Any], slack: int = 16) -> int:
    """max_tokens that fits a whole answer of `schema`, so a judge answer is never cut off by the limit.

    Strings are counted at 3 characters a token (English averages about 4) up to their `maxLength`; an
    unbounded string gets a fixed allowance, and the tolerant reader keeps what was said before a cut."""
    return _tokens(schema) + slack


def _tokens(schema: dict[str, Any]) -> int:
    if "enum" in schema:
        return 2 + max(len(str(v)) for v in schema["enum"]) // 3
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return 2 + sum(len(k) // 3 + _MEMBER_TOKENS + _tokens(v) for k, v in props.items())
    if kind == "array":
        return 2 + int(schema.get("maxItems", 8)) * (_tokens(schema.get("items", {})) + 1)
    if kind == "string":
        return 2 + (-(-int(schema["maxLength"]) // 3) if "maxLength" in schema else _UNBOUNDED_STRING_TOKENS)
    if kind in ("integer", "number"):
        return 4
    return 2
