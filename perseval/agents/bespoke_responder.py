"""Bespoke responder: answers a query from search results and, optionally, raw history sessions.

Two of the paper's user-context settings (Table 4) as one agent:
`user_context: none` (no user context) and `user_context: raw_history`
(the user's most relevant past sessions, retrieved with the query, given as
raw text). Search results come from whatever back end the run binds to
`ctx.search` (local corpus, gold oracle, web); with none bound the agent
answers from the model alone.
"""
from __future__ import annotations

from typing import Any

from perseval.agents.base import Agent, AgentContext
from perseval.errors import ConfigError
from perseval.records import AgentOutput, Document, Instance, Passage
from perseval.registry import register_agent

CONTEXTS = ("none", "raw_history")
# Small defaults: the embedded backbone has a 4096-token window and writes ~40 tokens/s.
DEFAULTS: dict[str, Any] = {
    "user_context": "none",
    "history_k": 3,  # sessions given as raw text
    "history_chars": 1500,  # budget shared by those sessions
    "search_k": 3,
    "search_chars": 1200,  # budget shared by the search results
    "max_tokens": 256,
    "search": "corpus",  # the back end the runner binds: corpus | gold | none | {kind: http, ...}
}
SYSTEM = ("You are a search assistant. Answer the user's question directly, grounded in the search results. "
          "Fit the depth, tone and layout of the answer to the user. Do not ask follow-up questions.")


@register_agent("bespoke.responder")
class BespokeResponder(Agent):
    benchmarks = ("bespoke",)

    def __init__(self, params: dict[str, Any] | None = None):
        merged = {**DEFAULTS, **(params or {})}
        unknown = sorted(set(merged) - set(DEFAULTS))
        if unknown:
            raise ConfigError(f"bespoke.responder: unknown params {unknown}; known: {sorted(DEFAULTS)}")
        if merged["user_context"] not in CONTEXTS:
            raise ConfigError(f"bespoke.responder: user_context must be one of {CONTEXTS}, "
                              f"got {merged['user_context']!r}")
        for key in ("history_k", "history_chars", "search_k", "search_chars", "max_tokens"):
            if not isinstance(merged[key], int) or merged[key] < 0:
                raise ConfigError(f"bespoke.responder: {key} must be a non-negative integer")
        super().__init__(merged)

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        if ctx.llm is None:
            raise ConfigError("bespoke.responder needs a backbone model")
        trace: list[dict[str, Any]] = []
        results = await self._search(instance, ctx, trace)
        sessions = await self._history(instance, ctx, trace) if self.params["user_context"] == "raw_history" else []
        messages = build_messages(instance.query, results, sessions, self.params)
        res = await ctx.llm.chat(messages, max_tokens=self.params["max_tokens"], repeat=repeat)
        out = AgentOutput(instance.instance_id, name, repeat, res.text.strip(), trace=trace,
                          prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens)
        if res.status != "ok":
            out.status, out.error = "failed", res.error
        return out

    async def _search(self, instance: Instance, ctx: AgentContext, trace: list[dict[str, Any]]) -> list[Passage]:
        if ctx.search is None or self.params["search_k"] == 0:
            return []
        results = await ctx.search(instance, instance.query, self.params["search_k"])
        trace.append({"step": "search", "query": instance.query,
                      "results": [{"doc_id": p.doc_id, "chunk_id": p.chunk_id, "score": p.score} for p in results]})
        return results

    async def _history(self, instance: Instance, ctx: AgentContext, trace: list[dict[str, Any]]) -> list[Document]:
        k = self.params["history_k"]
        if k == 0:
            return []
        # retrieval returns chunks; ask for more than k so that k distinct sessions survive de-duplication
        passages = await ctx.retrieve(instance.user_id, instance.query, 4 * k)
        best: dict[str, Passage] = {}
        for p in passages:
            if p.doc_id not in best or p.score > best[p.doc_id].score:
                best[p.doc_id] = p
        top = sorted(best.values(), key=lambda p: -p.score)[:k]
        by_id = {d.doc_id: d for d in ctx.documents(instance.user_id)}
        # the whole session as raw text when the history has it, else the retrieved chunk
        sessions = [by_id.get(p.doc_id) or Document(instance.user_id, p.doc_id, p.text) for p in top]
        trace.append({"step": "history", "query": instance.query, "sessions": [
            {"doc_id": p.doc_id, "score": p.score, "source": s.meta.get("source", "")} for p, s in zip(top, sessions)
        ]})
        return sessions


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " [...]"


def build_messages(query: str, results: list[Passage], sessions: list[Document],
                   params: dict[str, Any]) -> list[dict[str, str]]:
    """The chat messages: question, search results, then (raw_history) the user's past sessions."""
    parts = [f"Question: {query}"]
    if results:
        each = max(params["search_chars"] // len(results), 1)
        parts.append("Search results:\n" + "\n".join(f"[{i}] {_clip(p.text, each)}"
                                                     for i, p in enumerate(results, start=1)))
    if sessions:
        each = max(params["history_chars"] // len(sessions), 1)
        blocks = [f"--- past {s.meta.get('source') or 'session'} ---\n{_clip(s.text, each)}" for s in sessions]
        parts.append("Some of this user's past chats and searches (they show what the user wants "
                     "and how they like answers):\n" + "\n".join(blocks))
    parts.append("Write the answer.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]
