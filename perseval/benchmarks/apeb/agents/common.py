"""What the LLM systems share: the user's history as prompt lines, and the ranking call with its one
correction turn (direct ranking, VQRA's ranking step and ReAct's final answer all end here, so the
exactly-5 contract of `answers.extract` is applied the same way to every system)."""
from __future__ import annotations

from typing import Any

from pydantic import Field

from perseval.agents.base import AgentContext
from perseval.benchmarks.apeb.answers import candidate_ids, extract, ranking_size
from perseval.benchmarks.apeb.prompts import correction_message, history_line, ranking_schema
from perseval.llm.base import ChatModel, ChatResult
from perseval.params import Params
from perseval.records import AgentOutput, Instance


class HistoryParams(Params):
    use_history: bool = True
    history_items: int = Field(30, ge=0)  # the last N history events, in time order
    retrieve_k: int | None = Field(None, ge=1)  # instead: the top-k history passages retrieved with the query
    max_tokens: int = Field(64, ge=1)  # of the ranking answer


def history_needs(p: HistoryParams) -> set[str]:
    if not p.use_history:
        return set()
    return {"retrieve" if p.retrieve_k else "documents"}


async def history_lines(instance: Instance, ctx: AgentContext, p: HistoryParams, query: str) -> list[str] | None:
    """The history shown to the model (None: no history section at all)."""
    if not p.use_history:
        return None
    if p.retrieve_k:
        assert ctx.retrieve is not None
        return [f"- {x.text}" for x in await ctx.retrieve(instance.user_id, query, p.retrieve_k)]
    assert ctx.documents is not None
    docs = ctx.documents(instance.user_id)
    return [history_line(d) for d in docs[-p.history_items:]] if p.history_items > 0 else []


def count(out: AgentOutput, result: ChatResult) -> None:
    out.prompt_tokens += result.prompt_tokens
    out.completion_tokens += result.completion_tokens


async def ask_ranking(llm: ChatModel, messages: list[dict[str, Any]], instance: Instance, out: AgentOutput, *,
                      max_tokens: int, repeat: int) -> AgentOutput:
    """Ask for the ranking under its JSON schema; one correction turn when fewer than k usable ids come back;
    then `out` is ok with the ranking, invalid with the raw text, or failed (a request that failed)."""
    ids, k = candidate_ids(instance), ranking_size(instance)
    valid: list[str] = []
    for attempt in (1, 2):
        result = await llm.chat(messages, json_schema=ranking_schema(ids, k), max_tokens=max_tokens, repeat=repeat)
        count(out, result)
        out.text = result.text
        if result.status != "ok":
            out.status, out.error = "failed", result.error or "request failed"
            return out
        answer = extract(instance, result.text)
        valid = answer.parsed["ranking"] if answer.parsed else []
        out.trace.append({"step": "answer", "attempt": attempt, "text": result.text, "valid_ids": valid,
                          **({"repair": answer.repairs} if answer.repairs else {})})
        if not answer.problem:
            out.parsed = answer.parsed
            return out
        messages = [*messages, {"role": "assistant", "content": result.text}, correction_message(len(valid), k)]
    out.status = "invalid"
    out.error = f"no {k} distinct candidate ids after a correction turn (last answer had {len(valid)})"
    return out
