"""Prompts and output schemas of APeB's own systems beyond the shared ranking request
(perseval.benchmarks.rankings): a history event as a prompt line, the correction turn of the ranking call, and
VQRA's query refinement. ReAct's own prompt lives with its loop. The refinement's texts are the card's
(perseval.benchmarks.apeb.card).
"""
from __future__ import annotations

from typing import Any

from perseval.benchmarks.apeb.card import REFINE_SYSTEM, REFINE_TEMPLATE
from perseval.benchmarks.rankings import activity_block
from perseval.core.instances import Document


def history_line(doc: Document) -> str:
    day = doc.timestamp[:10]  # the date is enough; times of day would cost tokens
    return " ".join(x for x in ("-", day, doc.text) if x)


def correction_message(kept: list[str], k: int = 5) -> dict[str, str]:
    """The correction turn: keep the usable ids, ask only for the missing ones (among the unused candidates)."""
    missing = k - len(kept)
    if not kept:
        ask = f"Reply again with exactly {k} different ids taken from the candidate list"
    else:
        ask = (f"It had {len(kept)} usable ids, which are kept, in this order: {', '.join(kept)}. Add the "
               f"{missing} next most likely, different from these and from each other")
    return {"role": "user", "content": f'{ask}, as {{"ranking": ["id", ...]}}, and nothing else.'}


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
