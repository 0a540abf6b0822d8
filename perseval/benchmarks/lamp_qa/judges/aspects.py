"""lamp_qa.aspects: the paper's evaluation (Salemi & Zamani 2025; the release's `evaluation/evaluator.py`),
an LLM judge of every rubric aspect of a question.

One request per aspect; the judge gives the paper's match score, 0 (not covered), 1 (covered somewhat) or 2
(covered well). A judgment's score is that match score / 2 (0, 0.5 or 1), so judge-check's pass rates and
AUC read it on the 0..1 scale of a verdict. Per question, as the paper: `score` = the sum of the aspects'
match scores / (2 x the number of aspects), here x100 (0..100; the paper reports the 0..1 value). Beside it
`full_coverage` and `no_coverage`: the shares of aspects scored 2 and 0 (x100).

A question is unscored on every metric when any of its aspects is (the judge's answer holds no match score
0, 1 or 2 of its own: the raw answer is kept) or failed: dropping an aspect would
change the denominator the paper divides by, and the paper's last resort, a 0 after 100 retries, would turn
an unreadable judge into a bad answer. An output with no answer (invalid or empty) covers no aspect: each is
scored 0 without a judge call. A failed output never reaches a judge (perseval.judges.base).
"""
from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from perseval.benchmarks.lamp_qa.answers import answer_text
from perseval.benchmarks.lamp_qa.prompts import MATCH_SCHEMA, SCORES, aspect_messages
from perseval.benchmarks.lamp_qa.views import LampQaGold, LampQaPayload
from perseval.core.parsing import judge_object
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.judges.base import Judge, JudgeBinding, answer_budget
from perseval.kernel.params import Params
from perseval.kernel.registry import register_judge
from perseval.llm.usage import prompt_record

METRICS = ("score", "full_coverage", "no_coverage")
NO_ANSWER = "no answer: covers no aspect (not sent to the judge)"


class AspectsParams(Params):
    max_tokens: int | None = None  # None: sized from the answer schema
    response_chars: int | None = Field(3000, ge=1)  # characters of the response the judge sees; None: all


def aspect_id(k: int) -> str:
    return f"aspect-{k + 1}"


def read_match(text: str, quoted: list[str]) -> int | None:
    """The match score 0/1/2 of the judge's own answer (not one copied from `quoted`); None when it has none."""
    obj = judge_object(text, structured=True, quoted=quoted)
    value = obj.get("match_score") if obj else None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return None if isinstance(value, bool) or value not in SCORES else int(value)


def question_scores(matches: list[int]) -> dict[str, float]:
    """The paper's per-question score (x100) and the coverage shares, from every aspect's match score."""
    n = len(matches)
    return {"score": 100.0 * sum(matches) / (2 * n), "full_coverage": 100.0 * matches.count(2) / n,
            "no_coverage": 100.0 * matches.count(0) / n}


@register_judge("lamp_qa.aspects")
class AspectsJudge(Judge[AspectsParams]):
    benchmark = "lamp_qa"
    item = "aspect"
    metrics = METRICS

    async def _aspect(self, k: int, aspect: dict[str, Any], instance: Instance, response: str,
                      binding: JudgeBinding, output: AgentOutput) -> Judgment:
        assert binding.model is not None
        messages = aspect_messages(LampQaPayload.of(instance).question, LampQaGold.of(instance).narrative,
                                   response, aspect, self.params.response_chars)
        result = await binding.model.chat(messages, json_schema=MATCH_SCHEMA, repeat=binding.repeat,
                                          max_tokens=self.params.max_tokens or answer_budget(MATCH_SCHEMA))
        prompt = prompt_record(messages)
        if result.status != "ok":
            return self.judgment(instance, output, binding, aspect_id(k), None, "failed", result.text,
                                 result.error or "", prompt)
        match = read_match(result.text, [response])
        if match is None:
            return self.judgment(instance, output, binding, aspect_id(k), None, "unscored", result.text,
                                 f"no match score in {list(SCORES)} in the judge's answer", prompt)
        return self.judgment(instance, output, binding, aspect_id(k), match / 2, "scored", result.text,
                             f"match score {match}", prompt, method="text")

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        rubric = [a.model_dump() for a in LampQaGold.of(instance).aspects]
        response = answer_text(output.text) if output.status == "ok" else ""
        if not response:
            return [self.judgment(instance, output, binding, aspect_id(k), 0.0, feedback=NO_ANSWER)
                    for k in range(len(rubric))]
        return list(await asyncio.gather(*(self._aspect(k, a, instance, response, binding, output)
                                           for k, a in enumerate(rubric))))

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        unscored = sum(1 for j in judgments if j.status != "scored" or j.score is None)
        values = question_scores([round(2 * j.score) for j in judgments if j.score is not None]) \
            if judgments and not unscored else None
        return [self.instance_score(instance, output, judgments, m, values[m] if values else None, len(judgments),
                                    unscored) for m in METRICS]
