"""Prompts and output schemas of the APeB systems: the ranking call (direct ranking, VQRA's second step,
ReAct's final answer) and VQRA's query refinement. ReAct's own prompt lives with its loop.

Kept compact on purpose: the embedded default is a 135M model with a 4k context, so a history line is
one short line and a candidate one line.
"""
from __future__ import annotations

from typing import Any

from perseval.core.records import Document

SYSTEM = (
    "You are a personal shopping assistant. Given what a shopper searched for and what they did "
    "on the platform before, pick the products they are most likely to buy. Reply with JSON only."
)


def history_line(doc: Document) -> str:
    day = doc.timestamp[:10]  # the date is enough; times of day would cost tokens
    return " ".join(x for x in ("-", day, doc.text) if x)


def candidate_line(card: dict[str, Any]) -> str:
    parts = [f"{card['id']}: {card['title']}"]
    if card.get("brand"):
        parts.append(f"brand {card['brand']}")
    parts.append(f"${float(card['price']):.2f}")
    title = card["title"].lower()
    extra = [a for a in card.get("attributes") or [] if a.replace("-", " ").lower() not in title]
    if extra:
        parts.append(", ".join(extra))
    return " | ".join(parts)


def activity_block(history: list[str]) -> str:
    body = "\n".join(history) if history else "- (no recorded activity)"
    return f"The shopper's recent activity, oldest first:\n{body}"


def ranking_messages(query: str, candidates: list[dict[str, Any]], history: list[str] | None,
                     k: int = 5, refined: str | None = None) -> list[dict[str, str]]:
    """Chat messages asking for the `k` best candidate ids; `history` None means no history section;
    `refined` is a history-aware rewrite of the query (VQRA), shown beside the shopper's own words."""
    parts = [activity_block(history)] if history is not None else []
    parts.append(f'The shopper searched for: "{query}"')
    if refined:
        parts.append(f'What they most likely want, given their history: "{refined}"')
    parts.append("Candidate products:\n" + "\n".join(candidate_line(c) for c in candidates))
    parts.append(final_instruction(k))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def final_instruction(k: int) -> str:
    return (f"Choose the {k} candidates this shopper is most likely to buy, most likely first. "
            f'Answer as {{"ranking": [{k} candidate ids]}}, using only ids from the list, each once.')


def correction_message(kept: list[str], k: int = 5) -> dict[str, str]:
    """The correction turn: keep the usable ids, ask only for the missing ones (among the unused candidates)."""
    missing = k - len(kept)
    if not kept:
        ask = f"Reply again with exactly {k} different ids taken from the candidate list"
    else:
        ask = (f"It had {len(kept)} usable ids, which are kept, in this order: {', '.join(kept)}. Add the "
               f"{missing} next most likely, different from these and from each other")
    return {"role": "user", "content": f'{ask}, as {{"ranking": ["id", ...]}}, and nothing else.'}


def ranking_schema(candidate_ids: list[str], k: int = 5) -> dict[str, Any]:
    # No uniqueItems: llama.cpp's grammar converter does not enforce it; the parser repairs duplicates.
    return {
        "type": "object",
        "properties": {"ranking": {"type": "array", "items": {"type": "string", "enum": list(candidate_ids)},
                                   "minItems": k, "maxItems": k}},
        "required": ["ranking"],
        "additionalProperties": False,
    }


# --- VQRA: vague query refinement with the history ------------------------------------------------

REFINE_SYSTEM = (
    "You help a shopping assistant understand vague searches. From the shopper's past activity, work out "
    "what they are really looking for and rewrite their search as a short, explicit product query "
    "(product type, preferred brand, price level, key features). Reply with JSON only."
)


def refine_messages(query: str, history: list[str]) -> list[dict[str, str]]:
    user = (f"{activity_block(history)}\n\nThe shopper searched for: \"{query}\"\n\n"
            'Rewrite the search as an explicit product query this shopper would type. Answer as '
            '{"refined_query": "..."}.')
    return [{"role": "system", "content": REFINE_SYSTEM}, {"role": "user", "content": user}]


REFINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"refined_query": {"type": "string", "minLength": 1, "maxLength": 160}},
    "required": ["refined_query"],
    "additionalProperties": False,
}
