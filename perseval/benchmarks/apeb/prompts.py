"""Prompts and the output schema of the single-step APeB ranking agent.

Kept compact on purpose: the embedded default is a 135M model with a 4k
context, so a history line is one short line and candidates are one line each.
"""
from __future__ import annotations

from typing import Any

from perseval.records import Document

SYSTEM = (
    "You are a personal shopping assistant. Given what a shopper searched for and what they did "
    "on the platform before, pick the products they are most likely to buy. Reply with JSON only."
)


def history_line(doc: Document) -> str:
    day = doc.timestamp[:10]  # the date is enough; times of day would cost tokens
    return " ".join(x for x in ("-", day, doc.text) if x)


def candidate_line(card: dict[str, Any]) -> str:
    return f"{card['id']}: {card['title']} | brand {card['brand']} | ${float(card['price']):.2f}"


def ranking_messages(query: str, candidates: list[dict[str, Any]], history: list[str] | None,
                     k: int = 5) -> list[dict[str, str]]:
    """Chat messages asking for the `k` best candidate ids; `history` None means no history section."""
    parts = []
    if history is not None:
        body = "\n".join(history) if history else "- (no recorded activity)"
        parts.append(f"The shopper's recent activity, oldest first:\n{body}")
    parts.append(f'The shopper searched for: "{query}"')
    parts.append("Candidate products:\n" + "\n".join(candidate_line(c) for c in candidates))
    parts.append(
        f"Choose the {k} candidates this shopper is most likely to buy, most likely first. "
        f'Answer as {{"ranking": [{k} candidate ids]}}, using only ids from the list, each once.'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def correction_message(n_valid: int, k: int = 5) -> dict[str, str]:
    return {"role": "user", "content": (
        f"That answer had {n_valid} usable ids. Reply again with exactly {k} different ids taken from "
        f'the candidate list, as {{"ranking": ["id", ...]}}, and nothing else.'
    )}


def ranking_schema(candidate_ids: list[str], k: int = 5) -> dict[str, Any]:
    # No uniqueItems: llama.cpp's grammar converter does not enforce it; the parser repairs duplicates.
    return {
        "type": "object",
        "properties": {"ranking": {"type": "array", "items": {"type": "string", "enum": list(candidate_ids)},
                                   "minItems": k, "maxItems": k}},
        "required": ["ranking"],
        "additionalProperties": False,
    }
