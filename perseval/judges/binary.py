"""One binary judgment (is this checkpoint met? is this claim present? is this instance valid?).

The judge model answers JSON {"<key>": bool, "reason": str}; a failed request is `failed`, an
answer that cannot be read is `unscored` with its raw text, never a 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perseval.llm.base import ChatModel
from perseval.parsing import parse_binary

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["verdict", "reason"],
}


@dataclass
class Verdict:
    score: float | None
    status: str  # scored | unscored | failed
    raw: str
    feedback: str


async def binary_verdict(model: ChatModel, messages: list[dict[str, Any]], *, repeat: int = 0,
                         max_tokens: int | None = None, schema: dict[str, Any] = VERDICT_SCHEMA,
                         key: str = "verdict") -> Verdict:
    result = await model.chat(messages, json_schema=schema, max_tokens=max_tokens, repeat=repeat)
    if result.status != "ok":
        return Verdict(None, "failed", result.text, result.error)
    score, reason = parse_binary(result.text, key=key)
    if score is None:
        return Verdict(None, "unscored", result.text, "judge answer could not be parsed")
    return Verdict(score, "scored", result.text, reason)
