"""The generation judge's four questions, written for perseval (the official prompts are not copied); the texts
are the card's (perseval.benchmarks.prefeval.card).

Each is one binary verdict; the response (and, for two checks, the preference) is quoted as data.
"""
from __future__ import annotations

from perseval.benchmarks.prefeval.card import (JUDGE_ANSWER_FORMAT, JUDGE_PREFERENCE, JUDGE_QUESTION, JUDGE_QUESTIONS,
                                             JUDGE_SYSTEM_INTRO, JUDGE_SYSTEM_OUTRO)
from perseval.judges.quoting import data_rule, quote

_SYSTEM = JUDGE_SYSTEM_INTRO + " " + data_rule("response") + " " + JUDGE_SYSTEM_OUTRO
QUESTIONS = JUDGE_QUESTIONS
NEEDS_PREFERENCE = {"hallucinates", "violates"}


def check_messages(check: str, question: str, response: str, preference: str,
                   max_chars: int | None) -> list[dict[str, str]]:
    text = response if max_chars is None else response[:max_chars]
    parts = []
    if check in NEEDS_PREFERENCE:
        parts.append(JUDGE_PREFERENCE.format(preference=preference))
    parts += [JUDGE_QUESTION.format(question=question), quote("response", text), QUESTIONS[check], JUDGE_ANSWER_FORMAT]
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]
