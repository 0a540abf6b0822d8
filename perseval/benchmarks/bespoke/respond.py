"""The responder's prompt (after Tables 13 and 14): the query, the search results, and the user context
(a profile, or raw history sessions) when there is one. The texts are the card's (perseval.benchmarks.bespoke.card)."""
from __future__ import annotations

from typing import Sequence

from perseval.benchmarks.bespoke.card import (ANSWER_SYSTEM, FINAL_INSTRUCTION, QUERY_TEMPLATE, RESULT_TEMPLATE,
                                            RESULTS_TEMPLATE, SESSION_TEMPLATE, USER_CONTEXT_TEMPLATE)
from perseval.benchmarks.bespoke.prompts import clip
from perseval.core.instances import Document, Passage

def raw_context(sessions: Sequence[Document], budget: int | None) -> tuple[str, int]:
    """Sessions as raw text under a shared character budget (None: whole), and the characters cut."""
    if not sessions:
        return "", 0
    each = None if budget is None else max(budget // len(sessions), 1)
    blocks, cut = [], 0
    for s in sessions:
        text = s.text.strip()
        if each is not None and len(text) > each:
            cut += len(text) - each
            text = clip(text, each)
        blocks.append(SESSION_TEMPLATE.format(source=s.meta.get("source") or "session", text=text))
    return "\n".join(blocks), cut


def answer_messages(query: str, results: Sequence[Passage], user_context: str, *,
                    search_chars: int | None) -> list[dict[str, str]]:
    """The answer prompt; search results share `search_chars` (None: whole)."""
    parts = [QUERY_TEMPLATE.format(query=query)]
    if results:
        each = None if search_chars is None else max(search_chars // len(results), 1)
        lines = [RESULT_TEMPLATE.format(i=i, text=p.text if each is None else clip(p.text, each))
                 for i, p in enumerate(results, start=1)]
        parts.append(RESULTS_TEMPLATE.format(results="\n".join(lines)))
    if user_context:
        parts.append(USER_CONTEXT_TEMPLATE.format(user_context=user_context))
    parts.append(FINAL_INSTRUCTION)
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]
