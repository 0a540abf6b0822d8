"""Bespoke responder: answers a query from search results and, optionally, raw history sessions.

Two of the paper's user-context settings (Table 4) as one agent:
`user_context: none` (no user context) and `user_context: raw_history`
(the user's most relevant past sessions, retrieved with the query, given as
raw text). Search results come from the back end named by `search` (local
corpus, gold oracle, web; perseval.search); with none the agent answers from
the model alone.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.bespoke.prompts import answer_messages
from perseval.params import Params
from perseval.records import AgentOutput, Document, Instance, Passage
from perseval.registry import register_agent


class ResponderParams(Params):
    # Small defaults: the embedded backbone has a 4096-token window and writes ~40 tokens/s.
    user_context: Literal["none", "raw_history"] = "none"
    history_k: int = Field(3, ge=0)  # sessions given as raw text
    history_chars: int = Field(1500, ge=0)  # budget shared by those sessions
    search_k: int = Field(3, ge=0)
    search_chars: int = Field(1200, ge=0)  # budget shared by the search results
    max_tokens: int = Field(256, ge=1)
    search: str | dict[str, Any] = "corpus"  # corpus | gold | none | {kind: http, ...} (perseval.search)


@register_agent("bespoke.responder")
class BespokeResponder(Agent):
    Params = ResponderParams
    params: ResponderParams
    benchmarks = ("bespoke",)

    def requires(self) -> frozenset[str]:
        p, needs = self.params, {"llm"}
        if p.search_k > 0 and p.search != "none":
            needs.add("search")
        if p.user_context == "raw_history" and p.history_k > 0:
            needs |= {"retrieve", "documents"}
        return frozenset(needs)

    def search_spec(self) -> str | dict[str, Any] | None:
        return self.params.search

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None
        trace: list[dict[str, Any]] = []
        results = await self._search(instance, ctx, trace)
        sessions = await self._history(instance, ctx, trace)
        p = self.params
        messages = answer_messages(instance.query, results, sessions, search_chars=p.search_chars,
                                   history_chars=p.history_chars)
        res = await ctx.llm.chat(messages, max_tokens=p.max_tokens, repeat=repeat)
        out = AgentOutput(instance.instance_id, name, repeat, res.text.strip(), trace=trace,
                          prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens)
        if res.status != "ok":
            out.status, out.error = "failed", res.error
        return out

    async def _search(self, instance: Instance, ctx: AgentContext, trace: list[dict[str, Any]]) -> list[Passage]:
        if ctx.search is None or self.params.search_k == 0:
            return []
        results = await ctx.search(instance, instance.query, self.params.search_k)
        trace.append({"step": "search", "query": instance.query,
                      "results": [{"doc_id": p.doc_id, "chunk_id": p.chunk_id, "score": p.score} for p in results]})
        return results

    async def _history(self, instance: Instance, ctx: AgentContext, trace: list[dict[str, Any]]) -> list[Document]:
        k = self.params.history_k
        if "retrieve" not in self.requires() or ctx.retrieve is None or ctx.documents is None:
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
