"""Bespoke responder: answers a query from search results and a user context built from the user's history.

Every user-context setting of Table 4 is a configuration of this one agent, named by the paper's columns:

  user_context       none | raw | profile        ("User Context"; none = no history usage)
  query_aware        false | true                ("Query Awareness": a static profile, or one per query)
  history_selection  none | llm | retriever      ("History Selection": the full history, the sessions an LLM
                                                  keeps judging one (query, session) pair per call (C.3), or
                                                  the bi-encoder's top `history_k` sessions (section 4.4))

  none                         -> user_context: none
  static profile               -> profile, query_aware: false, history_selection: none
  query-aware profile          -> profile, query_aware: true,  history_selection: none
  selected sessions as raw     -> raw,     query_aware: true,  history_selection: llm
  selected sessions, profile   -> profile, query_aware: true,  history_selection: llm

Search results come from the back end named by `search` (perseval.retrieval.search: the local corpus index, the
gold information of 4.5 (`search_k: null` gives every gold claim), a web API, or none). Budgets
(`*_chars`) are None for "whole"; a history over its budget is fitted by `history_truncation`
(perseval.benchmarks.bespoke.truncation: share, oldest_first or error) and the cut is recorded in the trace.

Profiles and LLM history selection are made by `profiler_model` when it is set (a model the experiment
loads and serves, by name; GPT-5 for every system in the paper, C.3), else by the backbone. The trace keeps every step: selection decisions, the profile and its sources, the context
given to the model, the search query and results, and the requests made (and answered from the cache).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.bespoke.context import (Memo, query_profile_messages, select_sessions,
                                                 static_profile_messages, top_sessions)
from perseval.benchmarks.bespoke.respond import answer_messages, raw_context
from perseval.kernel.capabilities import Capability
from perseval.benchmarks.bespoke.truncation import (HistoryCut, HistoryOverBudget, Truncation, fit_history,
                                                    share_budget)
from perseval.llm.base import ChatModel, ChatResult
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Document, Instance, Passage
from perseval.kernel.registry import register_agent


class ResponderParams(Params):
    # added after outputs were cached: at these values they compute what was computed before (no new key)
    key_compatible = {"history_truncation": "share", "profiler_model": None}
    user_context: Literal["none", "raw", "profile"] = "none"
    query_aware: bool = False
    history_selection: Literal["none", "llm", "retriever"] = "none"
    history_k: int = Field(3, ge=1)  # retriever selection: sessions kept
    history_chars: int | None = Field(1500, ge=1)  # raw context budget (None: whole sessions)
    profile_history_chars: int | None = Field(None, ge=1)  # history shown to the profiler (None: all of it)
    history_truncation: Truncation = "share"  # how a history over its budget is cut (truncation.py)
    profiler_model: str | None = None  # the model that selects sessions and writes profiles (None: the backbone)
    profile_max_tokens: int = Field(400, ge=1)
    select_max_tokens: int = Field(48, ge=1)
    search: str | dict[str, Any] = "corpus"  # corpus | gold | none | {kind: http, ...} (perseval.retrieval.search)
    search_k: int | None = Field(3, ge=0)  # None: every result the back end has (search: gold only)
    search_chars: int | None = Field(1200, ge=1)  # budget shared by the search results (None: whole)
    max_tokens: int = Field(256, ge=1)

    @model_validator(mode="after")
    def _setting(self) -> "ResponderParams":
        if self.user_context == "none" and (self.query_aware or self.history_selection != "none"):
            raise ValueError("user_context none uses no history: query_aware and history_selection do not apply")
        if self.history_selection != "none" and not self.query_aware:
            raise ValueError("history_selection picks sessions for the query: set query_aware: true")
        if self.user_context == "raw" and self.query_aware and self.history_selection == "none":
            raise ValueError("raw history is query-aware only through history_selection (llm or retriever)")
        if self.search_k is None and self.search != "gold":
            raise ValueError("search_k: null (every result) applies to search: gold only; give a number")
        if self.profiler_model is not None and not self._profiles():
            raise ValueError("profiler_model: this setting makes no profile and selects no sessions by LLM")
        return self

    def _profiles(self) -> bool:
        """Whether some request of this setting is the profiler's (a profile or an LLM session selection)."""
        return self.user_context == "profile" or self.history_selection == "llm"


PROFILER = "profiler"  # the role of the model that selects sessions and writes profiles (C.3)


class _Counted:
    """The backbone, counting requests per step (cache hits apart) for the trace."""

    def __init__(self, llm: ChatModel):
        self.llm, self.name = llm, llm.name
        self.calls, self.cached = 0, 0

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        res = await self.llm.chat(messages, **kwargs)
        self.calls += 1
        self.cached += int(res.cached)
        return res


@register_agent("bespoke.responder")
class BespokeResponder(Agent[ResponderParams]):
    benchmarks = ("bespoke",)

    def __init__(self, params: Any = None):
        super().__init__(params)
        self.memo = Memo()  # one request per distinct profile/selection prompt within a shard

    def requires(self) -> frozenset[str]:
        p, needs = self.params, {Capability.LLM}
        if p.search_k != 0 and p.search != "none":
            needs.add(Capability.SEARCH)
        if p.user_context != "none":
            needs.add(Capability.DOCUMENTS)
        if p.history_selection == "retriever":
            needs.add(Capability.RETRIEVE)
        return frozenset(needs)

    def search_spec(self) -> str | dict[str, Any] | None:
        return self.params.search

    def role_models(self) -> dict[str, str]:
        return {PROFILER: self.params.profiler_model} if self.params.profiler_model else {}

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None
        llm = _Counted(ctx.llm)
        profiler = self._profiler(ctx, llm)
        trace: list[dict[str, Any]] = []
        context, failure = await self._user_context(instance, ctx, profiler, repeat, trace)
        results = await self._search(instance, ctx, trace)
        messages = answer_messages(instance.query, results, context, search_chars=self.params.search_chars)
        trace.append({"step": "answer", "prompt_chars": len(messages[-1]["content"])})
        res = await llm.chat(messages, max_tokens=self.params.max_tokens, repeat=repeat)
        requests = {"llm_calls": llm.calls, "cached": llm.cached}
        if profiler is not llm:
            requests.update(profiler=profiler.name, profiler_calls=profiler.calls, profiler_cached=profiler.cached)
        trace.append({"step": "requests", **requests})
        out = AgentOutput(instance.instance_id, name, repeat, res.text.strip(), trace=trace,
                          prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens)
        if res.status != "ok" or failure:
            out.status, out.error = "failed", failure or res.error
        return out

    # --- user context ----------------------------------------------------------------------------

    def _profiler(self, ctx: AgentContext, llm: _Counted) -> _Counted:
        """Who selects sessions and writes profiles: the configured profiler model, else the backbone."""
        if not self.params.profiler_model:
            return llm
        model = ctx.roles.get(PROFILER)
        if model is None:
            raise RuntimeError(f"profiler_model {self.params.profiler_model!r} was not served to this run")
        return _Counted(model)

    def _fit(self, sessions: list[Document], budget: int | None) -> tuple[list[Document], HistoryCut, str]:
        """(sessions to show, what was cut, failure): the history fitted to `budget` by the policy."""
        try:
            kept, cut = fit_history(sessions, budget, self.params.history_truncation)
        except HistoryOverBudget as exc:
            return [], HistoryCut("error", budget, len(sessions)), str(exc)
        return kept, cut, ""

    async def _user_context(self, instance: Instance, ctx: AgentContext, profiler: _Counted, repeat: int,
                            trace: list[dict[str, Any]]) -> tuple[str, str]:
        """(context text, failure): the user context of this setting; a failed profile request, or a history
        over its budget under `history_truncation: error`, fails the output."""
        p = self.params
        if p.user_context == "none":
            return "", ""
        assert ctx.documents is not None
        sessions = await self._sessions(instance, ctx, profiler, repeat, trace)
        budget = p.history_chars if p.user_context == "raw" else p.profile_history_chars
        shown, fitted, failure = self._fit(sessions, budget)
        if failure:
            trace.append({"step": "context", "form": p.user_context, "truncation": fitted.record(), "error": failure})
            return "", failure
        if p.user_context == "raw":
            text, cut = raw_context(shown, share_budget(p.history_chars, p.history_truncation))
            fitted.chars_cut += cut
            trace.append({"step": "context", "form": "raw", "sessions": [d.doc_id for d in shown],
                          "chars_cut": fitted.chars_cut, "truncation": fitted.record(), "text": text})
            return text, ""
        share = share_budget(p.profile_history_chars, p.history_truncation)
        if p.query_aware:
            messages, cut = query_profile_messages(instance.query, shown, share)
        else:
            messages, cut = static_profile_messages(shown, share)
        fitted.chars_cut += cut
        res = await self.memo.chat(profiler, messages, max_tokens=p.profile_max_tokens, repeat=repeat)
        trace.append({"step": "context", "form": "profile", "query_aware": p.query_aware,
                      "sessions": [d.doc_id for d in shown], "chars_cut": fitted.chars_cut,
                      "truncation": fitted.record(), "text": res.text.strip(), "status": res.status})
        return res.text.strip(), ("" if res.status == "ok" else f"profile request failed: {res.error}")

    async def _sessions(self, instance: Instance, ctx: AgentContext, profiler: _Counted, repeat: int,
                        trace: list[dict[str, Any]]) -> list[Document]:
        p = self.params
        history = ctx.documents(instance.user_id) if ctx.documents else []
        if p.history_selection == "none":
            trace.append({"step": "history", "selection": "none", "sessions": len(history)})
            return history
        if p.history_selection == "retriever":
            return await self._retrieved(instance, ctx, history, trace)
        decisions = await select_sessions(profiler, self.memo, instance.query, history, repeat=repeat,
                                          max_tokens=p.select_max_tokens)
        trace.append({"step": "history", "selection": "llm", "sessions": len(history), "decisions": [
            {"doc_id": s.doc.doc_id, "source": s.doc.meta.get("source", ""), "keep": s.keep, "status": s.status,
             "reason": s.reason} for s in decisions]})
        return [s.doc for s in decisions if s.keep]

    async def _retrieved(self, instance: Instance, ctx: AgentContext, history: list[Document],
                         trace: list[dict[str, Any]]) -> list[Document]:
        k = self.params.history_k
        if ctx.retrieve is None:
            trace.append({"step": "history", "selection": "retriever", "sessions": 0})
            return []
        # retrieval returns chunks; ask for more than k so that k distinct sessions survive de-duplication
        top = top_sessions(await ctx.retrieve(instance.user_id, instance.query, 4 * k), k)
        by_id = {d.doc_id: d for d in history}
        # the whole session as raw text when the history has it, else the retrieved chunk
        sessions = [by_id.get(h.doc_id) or Document(instance.user_id, h.doc_id, h.text) for h in top]
        trace.append({"step": "history", "selection": "retriever", "query": instance.query, "sessions": [
            {"doc_id": h.doc_id, "score": h.score, "source": s.meta.get("source", "")} for h, s in zip(top, sessions)]})
        return sessions

    # --- search ----------------------------------------------------------------------------------

    async def _search(self, instance: Instance, ctx: AgentContext, trace: list[dict[str, Any]]) -> list[Passage]:
        if ctx.search is None or self.params.search_k == 0:
            return []
        results = await ctx.search(instance, instance.query, self.params.search_k or 0)  # gold: 0 is every claim
        backend = self.params.search if isinstance(self.params.search, str) else self.params.search.get("kind")
        trace.append({"step": "search", "backend": backend, "query": instance.query, "results": [
            {"doc_id": r.doc_id, "chunk_id": r.chunk_id, "score": r.score, "text": r.text} for r in results]})
        return results
