"""apeb.rubric: the paper's rubric analysis - an LLM judge grades each trajectory (the agent's trace) on
intent inference, history attribution and planning, 1-5 each.

The judge sees the query the agent was given, the agent's steps and final ranking, and, as reference
the agent never saw, the shopper's own later explicit query, the product they bought and the history
events about its category. One judgment per criterion, its raw answer kept; a criterion the answer does
not rate with an integer 1-5 is `unscored` (never a number), a failed request `failed`. Outputs of
systems that used no model (oracle, random, the non-LLM baseline) have no trajectory to grade and get no
judgments. Scores stay on the 1-5 scale.

Everything the judge reads that it did not write is untrusted - the agent's trajectory (its thoughts, tool
observations and answers) and the shopper's own queries and history - so each is quoted as data
(perseval.judges.quoting), and the ratings are read only from the judge's own answer
(perseval.core.parsing.judge_object), never from an object that sits in the quoted material.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

from pydantic import Field

from perseval.benchmarks.rankings import candidate_line
from perseval.judges.base import Judge, JudgeBinding, scored_values
from perseval.judges.quoting import data_rule, quote
from perseval.llm.usage import prompt_record
from perseval.kernel.params import Params
from perseval.core.parsing import judge_object
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.views import RankingPayload
from perseval.benchmarks.apeb.views import ApebGold

CRITERIA = ("intent_inference", "history_attribution", "planning")
HELP = {
    "intent_inference": "did the agent work out what the shopper really wanted (product type, brand, price "
                        "level, features), close to their later explicit query?",
    "history_attribution": "did it ground its choices in the shopper's real history (the brands, prices and "
                           "features they showed interest in), rather than guessing or citing noise?",
    "planning": "were its steps purposeful and efficient, each one moving towards the decision, ending in a "
                "sound final ranking?",
}
RUBRIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {**{c: {"type": "integer", "enum": [1, 2, 3, 4, 5]} for c in CRITERIA},
                   "feedback": {"type": "string", "maxLength": 240}},
    "required": [*CRITERIA, "feedback"],
}
QUOTED_TAGS = ("search", "reference", "trajectory")
SYSTEM = ("You grade how a shopping agent reasoned for one shopper. Judge the trajectory, not only whether "
          "the final pick was right. Be strict: 5 is flawless, 3 is partly right, 1 is absent or wrong. "
          + data_rule(*QUOTED_TAGS))


class RubricParams(Params):
    trajectory_chars: int = Field(2400, ge=200)  # sized for the embedded 4096-token judge
    max_tokens: int = Field(160, ge=16)


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " [...]"


def render_step(entry: dict[str, Any]) -> str | None:
    step = entry.get("step")
    if step == "refine":
        q = entry.get("refined_query")
        return f"refined the query into {q!r}" if q else "tried to refine the query; the answer was unreadable"
    if step == "act":
        line = (f"thought: {_short(entry.get('thought', ''))}\n"
                f"   action: {entry.get('tool')}({_short(entry.get('arguments', {}))})")
        return line + (f"\n   observation: {_short(entry['observation'], 300)}" if "observation" in entry else "")
    if step == "think":
        return f"wrote without calling a tool: {_short(entry.get('text', ''))}"
    if step == "answer":
        return f"answered (attempt {entry.get('attempt')}): {_short(entry.get('text', ''))}"
    if step == "budget":
        return "ran out of steps; the final answer was forced"
    return None  # bookkeeping (token bills, scores) is not part of the reasoning


def render_trajectory(instance: Instance, output: AgentOutput, limit: int) -> str:
    steps = [s for s in (render_step(e) for e in output.trace) if s]
    lines = [f"{i}. {s}" for i, s in enumerate(steps, 1)] or ["(no intermediate steps: a single answer)"]
    cards = {c["id"]: c for c in RankingPayload.of(instance).candidates}
    ranking = (output.parsed or {}).get("ranking") or []
    if output.status == "ok" and ranking:
        lines.append("Final ranking:\n" + "\n".join(f"  {n}. {candidate_line(cards[i])}" for n, i in
                                                    enumerate(ranking, 1) if i in cards))
    else:
        lines.append(f"Final ranking: none ({output.status}: {_short(output.error, 160)})")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit // 2] + "\n[...]\n" + text[-limit // 2:]


def rubric_quotes(instance: Instance, output: AgentOutput, limit: int) -> dict[str, str]:
    """The untrusted material of one judge prompt, by tag: the search the agent was given, the reference
    the agent never saw (the shopper's later search, the purchase, their history) and the trajectory."""
    gold = ApebGold.of(instance)
    cards = {c["id"]: c for c in RankingPayload.of(instance).candidates}
    bought = cards.get(gold.purchased)
    evidence = "\n".join(f"- {x}" for x in gold.history_evidence) or "- (none recorded)"
    queries = gold.session.get("queries") or [instance.query]
    reference = (f'- the shopper\'s own later, explicit search: "{queries[-1]}"\n'
                 f"- what they bought: {candidate_line(bought) if bought else gold.purchased}\n"
                 f"- their history about this kind of product:\n{evidence}")
    return {"search": instance.query, "reference": reference,
            "trajectory": render_trajectory(instance, output, limit)}


def rubric_messages(instance: Instance, output: AgentOutput, limit: int) -> list[dict[str, str]]:
    q = rubric_quotes(instance, output, limit)
    user = (
        f"The shopper's search the agent was given:\n{quote('search', q['search'])}\n\n"
        f"Reference (the agent did not see this):\n{quote('reference', q['reference'])}\n\n"
        f"The agent's trajectory:\n{quote('trajectory', q['trajectory'])}\n\n"
        "Criteria (1 to 5 each):\n" + "\n".join(f"{c}: {HELP[c]}" for c in CRITERIA) + "\n\n"
        'Reply with JSON only: {"intent_inference": 1-5, "history_attribution": 1-5, "planning": 1-5, '
        '"feedback": "one sentence"}'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def _rating(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and 1 <= value <= 5 else None


def parse_rubric(text: str, quoted: Sequence[str] = ()) -> tuple[dict[str, int | None], str]:
    """Each criterion's rating (None when missing or not an integer 1-5) and the feedback, from the judge's
    own answer: a JSON answer cut short by the token limit still gives the ratings written before the cut,
    and an object that also appears in the `quoted` material is never read (perseval.core.parsing.judge_object).
    No object, no ratings: loose "criterion: n" text is not read, as it may be an echo of the quoted
    trajectory (an agent that wrote "planning: 5" must not grade itself)."""
    obj = judge_object(text or "", structured=True, quoted=quoted) or {}
    return {c: _rating(obj.get(c)) for c in CRITERIA}, str(obj.get("feedback", ""))


def used_a_model(output: AgentOutput) -> bool:
    return output.prompt_tokens > 0 or output.completion_tokens > 0


@register_judge("apeb.rubric")
class RubricJudge(Judge[RubricParams]):
    benchmark = "apeb"
    item = "rubric"
    metrics = CRITERIA

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        if not used_a_model(output):
            return []
        assert binding.model is not None
        limit = self.params.trajectory_chars
        messages = rubric_messages(instance, output, limit)
        res = await binding.model.chat(messages, json_schema=RUBRIC_SCHEMA, max_tokens=self.params.max_tokens,
                                       repeat=binding.repeat)
        prompt = prompt_record(messages)
        if res.status != "ok":
            return [self.judgment(instance, output, binding, c, None, "failed", res.text, res.error, prompt)
                    for c in CRITERIA]
        ratings, feedback = parse_rubric(res.text, quoted=list(rubric_quotes(instance, output, limit).values()))
        return [self.judgment(instance, output, binding, c, None if ratings[c] is None else float(ratings[c]),
                              "scored" if ratings[c] is not None else "unscored", res.text,
                              feedback if ratings[c] is not None else "no 1-5 rating for this criterion", prompt)
                for c in CRITERIA]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        out = []
        for c in CRITERIA:
            items = [j for j in judgments if j.item_id == c]
            values = scored_values(items)
            out.append(self.instance_score(instance, output, judgments, c, values[0] if values else None,
                                           len(items), len(items) - len(values)))
        return out
