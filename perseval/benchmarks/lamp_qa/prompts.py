"""LaMP-QA's prompts, in perseval's own words after the structure of the paper's (Salemi & Zamani 2025) and
the release's code; none of their wording is copied. The texts are the card's (perseval.benchmarks.lamp_qa.card).

Answering: a system message saying the task, then the user message: with profile items, the user's earlier
posts (each item's text, the k chosen ones separated by blank lines, in retrieval order) under one heading
and the current question under another; without, the question alone. The oracle adds the question's rubric
aspects as the points the answer should cover (the release's plan-conditioned prompt, fed the gold plan).

Judging: one request per rubric aspect with the question, the asker's narrative, the response (quoted as data)
and the aspect with its reason and evidence; the judge answers only a match score on the paper's scale, 0 (the
response does not cover the aspect), 1 (covers it somewhat) or 2 (covers it well), as the paper's judge does
(no reason: a small judge copies a reason's placeholder instead of writing one).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from perseval.benchmarks.lamp_qa.card import (ANSWER_SYSTEM, ITEM_SEPARATOR, JUDGE_INSTRUCTION, JUDGE_TEMPLATE,
                                            NO_PROFILE_TEMPLATE, PLAN_HEADING, PROFILE_SYSTEM,
                                            PROFILE_TEMPLATE, QUESTION_HEADING)
from perseval.judges.quoting import data_rule, quote


def answer_messages(question: str, items: Sequence[str], plan: Sequence[str] = ()) -> list[dict[str, str]]:
    """The answering request: the question with the chosen profile items (none: the question alone) and,
    for the oracle, the points to cover."""
    if not items and not plan:
        return [{"role": "system", "content": ANSWER_SYSTEM},
                {"role": "user", "content": NO_PROFILE_TEMPLATE.format(question=question)}]
    parts = [PROFILE_TEMPLATE.format(items=ITEM_SEPARATOR.join(items), question=question) if items
             else f"{QUESTION_HEADING}\n{question}"]
    if plan:
        parts.append(PLAN_HEADING + "\n" + "\n".join(f"- {p}" for p in plan))
    return [{"role": "system", "content": PROFILE_SYSTEM if items else ANSWER_SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)}]


SCORES = (0, 1, 2)  # the paper's match score of one aspect
MATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"match_score": {"type": "integer", "enum": list(SCORES)}},
    "required": ["match_score"],
}
JUDGE_SYSTEM = JUDGE_INSTRUCTION + " " + data_rule("response")


def clip(text: str, limit: int | None) -> str:
    text = text.strip()
    return text if limit is None or len(text) <= limit else text[:limit].rstrip() + " [...]"


def aspect_messages(question: str, narrative: str, response: str, aspect: Mapping[str, str],
                    response_chars: int | None = None) -> list[dict[str, str]]:
    """The judge's request for one aspect (the response cut to `response_chars`; None: whole)."""
    user = JUDGE_TEMPLATE.format(question=question, narrative=narrative or "(none)",
                                 response=quote("response", clip(response, response_chars)), aspect=aspect["aspect"],
                                 reason=aspect["reason"], evidence=aspect["evidence"])
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
