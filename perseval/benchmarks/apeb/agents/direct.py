"""apeb.direct: single-step LLM ranking of APeB candidates, with or without the user's history.

One call asks for {"ranking": [5 ids]} under a JSON schema. The benchmark's
extraction drops unknown and repeated ids (recorded in the trace); when fewer
than five valid ids remain, one correction turn is sent; if that still fails the
output is marked invalid with its raw text, never silently accepted.
"""
from __future__ import annotations

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.apeb.answers import candidate_ids, extract, ranking_size
from perseval.benchmarks.apeb.prompts import correction_message, history_line, ranking_messages, ranking_schema
from perseval.llm.base import ChatResult
from perseval.params import Params
from perseval.records import AgentOutput, Instance
from perseval.registry import register_agent


class DirectParams(Params):
    use_history: bool = True
    history_items: int = Field(30, ge=0)  # the last N history events, in time order
    retrieve_k: int | None = Field(None, ge=1)  # instead: the top-k history passages retrieved with the query
    max_tokens: int = Field(64, ge=1)


@register_agent("apeb.direct")
class APeBDirect(Agent):
    Params = DirectParams
    params: DirectParams
    benchmarks = ("apeb",)

    def requires(self) -> frozenset[str]:
        if not self.params.use_history:
            return frozenset({"llm"})
        return frozenset({"llm", "retrieve" if self.params.retrieve_k else "documents"})

    async def _history(self, instance: Instance, ctx: AgentContext) -> list[str] | None:
        p = self.params
        if not p.use_history:
            return None
        if p.retrieve_k:
            assert ctx.retrieve is not None
            return [f"- {x.text}" for x in await ctx.retrieve(instance.user_id, instance.query, p.retrieve_k)]
        assert ctx.documents is not None
        docs = ctx.documents(instance.user_id)
        return [history_line(d) for d in docs[-p.history_items:]] if p.history_items > 0 else []

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None
        out = AgentOutput(instance.instance_id, name, repeat, text="")
        ids, k = candidate_ids(instance), ranking_size(instance)
        messages = ranking_messages(instance.query, instance.payload["candidates"], await self._history(instance, ctx), k)
        for attempt in (1, 2):
            result = await ctx.llm.chat(messages, json_schema=ranking_schema(ids, k), max_tokens=self.params.max_tokens,
                                        repeat=repeat)
            _count(out, result)
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
            messages = [*messages, {"role": "assistant", "content": result.text},
                        correction_message(len(valid), k)]
        out.status = "invalid"
        out.error = f"no {k} distinct candidate ids after a correction turn (last answer had {len(valid)})"
        return out


def _count(out: AgentOutput, result: ChatResult) -> None:
    out.prompt_tokens += result.prompt_tokens
    out.completion_tokens += result.completion_tokens
