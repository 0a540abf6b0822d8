"""What the LLM systems share: the user's history as prompt lines, and the ranking call with its one
correction turn (direct ranking, VQRA's ranking step and ReAct's final answer all end here, so the
exactly-5 contract of `answers.extract` is applied the same way to every system)."""
from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from perseval.agents.base import AgentContext
from perseval.benchmarks.apeb.prompts import correction_message, history_line
from perseval.benchmarks.rankings import candidate_ids, extract, parse_ranking, ranking_schema, ranking_size
from perseval.kernel.capabilities import Capability
from perseval.llm.base import ChatModel, ChatResult
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance
from perseval.llm.usage import trace_fields


class HistoryParams(Params):
    use_history: bool = True
    history_items: int | None = Field(30, ge=0)  # the last N history events, in time order; None: every event
    retrieve_k: int | None = Field(None, ge=1)  # instead: the top-k history passages retrieved with the query
    max_tokens: int = Field(64, ge=1)  # of the ranking answer


def history_needs(p: HistoryParams) -> set[str]:
    if not p.use_history:
        return set()
    return {Capability.RETRIEVE if p.retrieve_k else Capability.DOCUMENTS}


async def history_lines(instance: Instance, ctx: AgentContext, p: HistoryParams, query: str) -> list[str] | None:
    """The history shown to the model (None: no history section at all)."""
    if not p.use_history:
        return None
    if p.retrieve_k:
        assert ctx.retrieve is not None
        return [f"- {x.text}" for x in await ctx.retrieve(instance.user_id, query, p.retrieve_k)]
    assert ctx.documents is not None
    docs = ctx.documents(instance.user_id)
    if p.history_items is None:
        return [history_line(d) for d in docs]
    return [history_line(d) for d in docs[-p.history_items:]] if p.history_items > 0 else []


def count(out: AgentOutput, result: ChatResult) -> None:
    out.prompt_tokens += result.prompt_tokens
    out.completion_tokens += result.completion_tokens


async def ask_ranking(llm: ChatModel, messages: list[dict[str, Any]], instance: Instance, out: AgentOutput, *,
                      max_tokens: int, repeat: int) -> AgentOutput:
    """Ask for the ranking under its JSON schema. When fewer than k usable ids come back, one correction turn
    keeps them and asks only for the missing ones, constrained to the candidates not yet used (a small model
    that repeats an id would repeat its whole answer if asked again). Then `out` is ok with the ranking,
    invalid with the raw text, or failed (a request that failed). The final ranking is checked by
    `answers.extract` like any other."""
    ids, k = candidate_ids(instance), ranking_size(instance)
    kept: list[str] = []
    for attempt in (1, 2):
        pool = [i for i in ids if i not in kept]
        result = await llm.chat(messages, json_schema=ranking_schema(pool, k - len(kept)), max_tokens=max_tokens,
                                repeat=repeat)
        count(out, result)
        if result.status != "ok":
            out.status, out.error, out.text = "failed", result.error or "request failed", result.text
            return out
        got = parse_ranking(result.text, pool, k - len(kept))
        out.text = json.dumps({"ranking": kept + got.ranking}) if kept else result.text
        answer = extract(instance, out.text)
        out.trace.append({"step": "answer", "attempt": attempt, **trace_fields(result), "text": result.text,
                          "valid_ids": answer.parsed["ranking"] if answer.parsed else [],
                          **({"repair": got.repairs()} if got.repaired else {})})
        if not answer.problem:
            out.parsed = answer.parsed
            return out
        kept = answer.parsed["ranking"] if answer.parsed else []
        messages = [*messages, {"role": "assistant", "content": result.text}, correction_message(kept, k)]
    out.status = "invalid"
    out.error = f"no {k} distinct candidate ids after a correction turn ({len(kept)} usable)"
    return out
