"""The responder's prompt (after Tables 13 and 14): the query, the search results, and the user context
(a profile, or raw history sessions) when there is one."""
from __future__ import annotations

from typing import Sequence

from perseval.benchmarks.bespoke.prompts import clip
from perseval.core.records import Document, Passage

ANSWER_SYSTEM = "You are a personalized information-seeking assistant."


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
        blocks.append(f"--- past {s.meta.get('source') or 'session'} ---\n{text}")
    return "\n".join(blocks), cut


def answer_messages(query: str, results: Sequence[Passage], user_context: str, *,
                    search_chars: int | None) -> list[dict[str, str]]:
    """The answer prompt; search results share `search_chars` (None: whole)."""
    parts = [f"<query>\n{query}\n</query>"]
    if results:
        each = None if search_chars is None else max(search_chars // len(results), 1)
        lines = [f"[{i}] {p.text if each is None else clip(p.text, each)}" for i, p in enumerate(results, start=1)]
        parts.append("<search results>\n" + "\n".join(lines) + "\n</search results>")
    if user_context:
        parts.append(f"<user context> (follow these preferences when you write the answer)\n{user_context}\n"
                     "</user context>\n\nGuidelines:\n- Match the organization, tone, depth and style the user "
                     "context implies.\n- Tailor the answer to this user's preferences, using accurate information "
                     "from the search results.\n- Do not ask follow-up questions or evaluate; give only the final "
                     "answer.")
    parts.append("Answer the query directly, personalized for this user and grounded in the search results. No "
                  "follow-up questions, no generic answer.")
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]
