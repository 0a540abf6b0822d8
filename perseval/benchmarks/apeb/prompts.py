"""Prompts and output schemas of the APeB systems: the ranking call (direct ranking, VQRA's second step,
ReAct's final answer) and VQRA's query refinement. ReAct's own prompt lives with its loop. The texts are
the card's (perseval.benchmarks.apeb.card).

Kept compact on purpose: the embedded default is a 135M model with a 4k context, so a history line is
one short line and a candidate one line.
"""
from __future__ import annotations

from typing import Any

from perseval.benchmarks.apeb.card import (ACTIVITY_TEMPLATE, CANDIDATES_TEMPLATE, FINAL_TEMPLATE, NO_ACTIVITY,
                                         QUERY_TEMPLATE, REFINE_SYSTEM, REFINE_TEMPLATE, REFINED_TEMPLATE, SYSTEM)
from perseval.core.instances import Document



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
    return ACTIVITY_TEMPLATE.format(activity="\n".join(history) if history else NO_ACTIVITY)


def ranking_messages(query: str, candidates: list[dict[str, Any]], history: list[str] | None,
                     k: int = 5, refined: str | None = None) -> list[dict[str, str]]:
    """Chat messages asking for the `k` best candidate ids; `history` None means no history section;
    `refined` is a history-aware rewrite of the query (VQRA), shown beside the shopper's own words."""
    parts = [activity_block(history)] if history is not None else []
    parts.append(QUERY_TEMPLATE.format(query=query))
    if refined:
        parts.append(REFINED_TEMPLATE.format(refined=refined))
    parts.append(CANDIDATES_TEMPLATE.format(candidates="\n".join(candidate_line(c) for c in candidates)))
    parts.append(final_instruction(k))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def final_instruction(k: int) -> str:
    return FINAL_TEMPLATE.format(k=k)


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

def refine_messages(query: str, history: list[str]) -> list[dict[str, str]]:
    user = REFINE_TEMPLATE.format(activity_block=activity_block(history), query=query)
    return [{"role": "system", "content": REFINE_SYSTEM}, {"role": "user", "content": user}]


REFINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"refined_query": {"type": "string", "minLength": 1, "maxLength": 160}},
    "required": ["refined_query"],
    "additionalProperties": False,
}
