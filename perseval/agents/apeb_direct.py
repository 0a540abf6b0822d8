"""apeb.direct: single-step LLM ranking of APeB candidates, with or without the user's history.

One call asks for {"ranking": [5 ids]} under a JSON schema. Unknown and
repeated ids are dropped (and recorded in the trace); when fewer than five
valid ids remain, one correction turn is sent; if that still fails the output
is marked invalid with its raw text, never silently accepted.
"""
from __future__ import annotations

from typing import Any

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.apeb.answers import parse_ranking
from perseval.benchmarks.apeb.prompts import correction_message, history_line, ranking_messages, ranking_schema
from perseval.errors import ConfigError
from perseval.llm.base import ChatResult
from perseval.records import AgentOutput, Instance
from perseval.registry import register_agent

TOP_K = 5
DEFAULTS: dict[str, Any] = {"use_history": True, "history_items": 30, "retrieve_k": None, "max_tokens": 64}


@register_agent("apeb.direct")
class APeBDirect(Agent):
    benchmarks = ("apeb",)

    def __init__(self, params: dict[str, Any] | None = None):
        super().__init__(params)
        unknown = sorted(set(self.params) - set(DEFAULTS))
        if unknown:
            raise ConfigError(f"apeb.direct: unknown params {unknown}; known: {sorted(DEFAULTS)}")
        self.settings = {**DEFAULTS, **self.params}

    async def _history(self, instance: Instance, ctx: AgentContext) -> list[str] | None:
        if not self.settings["use_history"]:
            return None
        k = self.settings["retrieve_k"]
        if k:
            passages = await ctx.retrieve(instance.user_id, instance.query, int(k))
            return [f"- {p.text}" for p in passages]
        n = int(self.settings["history_items"])
        docs = ctx.documents(instance.user_id)
        return [history_line(d) for d in docs[-n:]] if n > 0 else []

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        out = AgentOutput(instance.instance_id, name, repeat, text="")
        if ctx.llm is None:
            out.status, out.error = "failed", "apeb.direct needs a backbone model"
            return out
        cards = instance.payload["candidates"]
        ids = [c["id"] for c in cards]
        k = min(TOP_K, len(ids))
        messages = ranking_messages(instance.query, cards, await self._history(instance, ctx), k)
        for attempt in (1, 2):
            result = await ctx.llm.chat(messages, json_schema=ranking_schema(ids, k),
                                        max_tokens=int(self.settings["max_tokens"]), repeat=repeat)
            _count(out, result)
            out.text = result.text
            if result.status != "ok":
                out.status, out.error = "failed", result.error or "request failed"
                return out
            answer = parse_ranking(result.text, ids, k)
            out.trace.append({"step": "answer", "attempt": attempt, "text": result.text,
                              "valid_ids": answer.ranking, **({"repair": answer.repairs()} if answer.repaired else {})})
            if len(answer.ranking) == k:
                out.parsed = {"ranking": answer.ranking}
                return out
            messages = [*messages, {"role": "assistant", "content": result.text},
                        correction_message(len(answer.ranking), k)]
        out.status = "invalid"
        out.error = f"no {k} distinct candidate ids after a correction turn (last answer had {len(answer.ranking)})"
        return out


def _count(out: AgentOutput, result: ChatResult) -> None:
    out.prompt_tokens += result.prompt_tokens
    out.completion_tokens += result.completion_tokens
