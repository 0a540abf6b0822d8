"""User context from a user's history (section 4.2, C.3): history selection, static and query-aware profiles.

- History selection (Table 20): the model judges ONE (query, session) pair per call and keeps the session
  when it carries query-specific personalization signals; a past search is shown as its query string only.
- Static profile (Table 19): one profile from the user's full history, the same for every query.
- Query-aware profile (Table 21): a profile for this query, from the full history or the selected sessions,
  with search and chat history given apart.

Every prompt is deterministic, so the request cache answers a repeated one (a user's static profile for
their next query, a selection shared by two settings) without a new request; `Memo` also shares one
in-flight request among the concurrent instances of a shard.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Sequence

from perseval.benchmarks.bespoke.sessions import selection_text
from perseval.core.hashing import canonical_json
from perseval.llm.base import ChatModel, ChatResult
from perseval.core.parsing import parse_binary
from perseval.core.instances import Document, Passage

KEEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"keep": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["keep", "reason"],
}


class Memo:
    """One request per distinct prompt among the concurrent tasks of one shard (the cache does the rest)."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[ChatResult]] = {}

    async def chat(self, llm: ChatModel, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        key = canonical_json([messages, kwargs])
        if key not in self._tasks:
            self._tasks[key] = asyncio.ensure_future(llm.chat(messages, **kwargs))
        return await self._tasks[key]


@dataclass
class Selection:
    doc: Document
    keep: bool
    status: str  # scored | unscored | failed (an unreadable or failed decision keeps nothing)
    reason: str


def selection_messages(query: str, session: Document, rubric: str | None = None) -> list[dict[str, str]]:
    """One (query, session) relevance question (Table 20); with the gold `rubric`, the oracle's (Table 22)."""
    source = session.meta.get("source", "chat")
    shown = selection_text(source, session.text)
    kind = "a past web search (only its query string is shown)" if source == "search" else "a past chat"
    gold = (f"Gold rubric (the ground truth of how this user wants this query answered; favour sessions that "
            f"instantiate, confirm or constrain it):\n<rubric>\n{rubric}\n</rubric>\n\n") if rubric else ""
    user = (f"Query: {query}\n\n{gold}History session ({kind}):\n<session>\n{shown}\n</session>\n\n"
            "Keep this session only if it holds user-specific signals that would concretely change the answer to "
            "THIS query: stable likes or dislikes, constraints (budget, time, access), background (role, skill, "
            "field), their setup or environment, or earlier choices on this topic. Also keep adjacent constraints "
            "that change the decision even if the topic differs (e.g. a search about a low-end laptop for a game "
            "recommendation). Reject off-topic sessions.\n"
            'Reply with JSON only: {"keep": true or false, "reason": "<one short sentence>"}')
    return [{"role": "system", "content": "You are a strict reviewer choosing which of a user's past sessions help "
                                          "personalize the answer to one query."},
            {"role": "user", "content": user}]


async def select_sessions(llm: ChatModel, memo: Memo, query: str, sessions: Sequence[Document], *, repeat: int,
                          max_tokens: int, rubric: str | None = None) -> list[Selection]:
    """One binary decision per (query, session) pair, all in flight at once (the oracle's given `rubric`)."""
    async def one(doc: Document) -> Selection:
        res = await memo.chat(llm, selection_messages(query, doc, rubric), json_schema=KEEP_SCHEMA,
                              max_tokens=max_tokens, repeat=repeat)
        if res.status != "ok":
            return Selection(doc, False, "failed", res.error)
        keep, reason = parse_binary(res.text, key="keep")
        return Selection(doc, keep == 1.0, "scored" if keep is not None else "unscored", reason or res.text[:200])

    return list(await asyncio.gather(*(one(d) for d in sessions)))


def top_sessions(hits: Sequence[Passage], k: int) -> list[Passage]:
    """Retrieved chunks merged into their sessions (each by its best chunk), the best `k` first."""
    best: dict[str, Passage] = {}
    for hit in hits:
        if hit.doc_id not in best or hit.score > best[hit.doc_id].score:
            best[hit.doc_id] = hit
    return sorted(best.values(), key=lambda h: -h.score)[:k]


def history_block(sessions: Sequence[Document], budget: int | None) -> tuple[str, str, int]:
    """(search history, chat history, characters cut): sessions in time order, each source under its own
    heading; a budget is shared equally by the sessions (None: nothing is cut)."""
    each = None if budget is None or not sessions else max(budget // len(sessions), 80)
    cut = 0
    blocks: dict[str, list[str]] = {"search": [], "chat": []}
    for d in sessions:
        text = d.text.strip()
        if each is not None and len(text) > each:
            cut += len(text) - each
            text = text[:each] + " [...]"
        blocks["search" if d.meta.get("source") == "search" else "chat"].append(text)
    return "\n---\n".join(blocks["search"]) or "(none)", "\n---\n".join(blocks["chat"]) or "(none)", cut


def static_profile_messages(sessions: Sequence[Document], budget: int | None) -> tuple[list[dict[str, str]], int]:
    searches, chats, cut = history_block(sessions, budget)
    user = (f"<search history>\n{searches}\n</search history>\n\n<chat history>\n{chats}\n</chat history>\n\n"
            "From this user's whole search and chat history, write a profile that will help answer their future "
            "information-seeking questions in the form they like. Ground every statement in what they did or "
            "said, not in demographic labels. List their broad and specific interests; for each, the subtopics "
            "and aspects they explore, the presentation they prefer (organization, depth, medium, tone, "
            "explanation style) and concrete guidance for answering them.")
    return [{"role": "system", "content": "You write user profiles for personalized information seeking."},
            {"role": "user", "content": user}], cut


def query_profile_messages(query: str, sessions: Sequence[Document], budget: int | None) -> tuple[list[dict[str, str]], int]:
    searches, chats, cut = history_block(sessions, budget)
    user = (f"<query>\n{query}\n</query>\n\n<search history>\n{searches}\n</search history>\n\n"
            f"<chat history>\n{chats}\n</chat history>\n\n"
            "Write personalized guidance for answering THIS query, one section per criterion: need alignment, "
            "content depth, tone, explanation style. Use only history signals specific to this query's topic, "
            "not general preferences. Decide whether the query is work or personal and favour history from that "
            "side. For each criterion say what to emphasize (topics, aspects, tools, examples), what to avoid, "
            "how to deliver it (format, structure, depth, examples) and why, citing the history behind it.")
    return [{"role": "system", "content": "You are a personalization profiler."},
            {"role": "user", "content": user}], cut



