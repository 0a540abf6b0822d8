"""The IBA-Bench RAG baseline (paper C.1): top-k history passages concatenated with the task.

params:
  top_k           passages to retrieve (default 3; 0 = the no-history agent)
  max_tokens      completion budget of a Generate(text) answer (default 192)
  api_max_tokens  completion budget of a CallAPI answer (default 64)
  passage_chars   characters kept of each passage in the prompt (default 600)
"""
from __future__ import annotations

from typing import Any

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.iba.prompts import api_messages, api_schema, generate_messages
from perseval.benchmarks.iba.scoring import canonical_slot
from perseval.llm.base import ChatModel, ChatResult
from perseval.parsing import extract_object
from perseval.records import AgentOutput, Instance, Passage
from perseval.registry import register_agent

DEFAULTS = {"top_k": 3, "max_tokens": 192, "api_max_tokens": 64, "passage_chars": 600}


def passage_trace(query: str, k: int, passages: list[Passage]) -> dict[str, Any]:
    return {"step": "retrieve", "query": query, "k": k,
            "passages": [{"doc_id": p.doc_id, "chunk_id": p.chunk_id, "score": p.score, "text": p.text}
                         for p in passages]}


def open_slots(api: dict[str, Any]) -> list[dict[str, Any]]:
    """Slots the agent must decide: every slot whose value the task does not fix."""
    fixed = api.get("task_fixed", {})
    return [s for s in api["slots"] if s["name"] not in fixed]


def parse_api_answer(text: str, api: dict[str, Any]) -> dict[str, Any] | None:
    """Task-fixed values plus the open slots found in the answer (snapped to allowed values); None if no JSON."""
    obj = extract_object(text)
    if obj is None:
        return None
    parsed: dict[str, Any] = dict(api.get("task_fixed", {}))
    for slot in open_slots(api):
        if slot["name"] in obj:
            parsed[slot["name"]] = canonical_slot(obj[slot["name"]], slot.get("values") or [])
    return parsed


@register_agent("iba.rag")
class IbaRagAgent(Agent):
    benchmarks = ("iba",)
    uses_llm = True

    def __init__(self, params: dict[str, Any] | None = None):
        super().__init__({**DEFAULTS, **(params or {})})

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        k = int(self.params["top_k"])
        passages = await ctx.retrieve(instance.user_id, instance.query, k) if k > 0 else []
        trace = [passage_trace(instance.query, k, passages)]
        if ctx.llm is None:
            return AgentOutput(instance.instance_id, name, repeat, "", status="failed",
                               error="iba.rag needs a backbone model", trace=trace)
        if instance.payload.get("action_type") == "call_api":
            return await self._call_api(instance, ctx.llm, repeat, name, passages, trace)
        messages = generate_messages(instance.query, passages, int(self.params["passage_chars"]))
        result = await ctx.llm.chat(messages, max_tokens=int(self.params["max_tokens"]), repeat=repeat)
        return self._output(instance, name, repeat, result, None, trace)

    async def _call_api(self, instance: Instance, llm: ChatModel, repeat: int, name: str,
                        passages: list[Passage], trace: list[dict[str, Any]]) -> AgentOutput:
        api = instance.payload["api"]
        slots = open_slots(api)
        messages = api_messages(instance.query, api, slots, passages, int(self.params["passage_chars"]))
        result = await llm.chat(messages, json_schema=api_schema(slots),
                                    max_tokens=int(self.params["api_max_tokens"]), repeat=repeat)
        parsed = parse_api_answer(result.text, api) if result.status == "ok" else None
        return self._output(instance, name, repeat, result, parsed, trace, expects_json=True)

    @staticmethod
    def _output(instance: Instance, name: str, repeat: int, result: ChatResult, parsed: dict[str, Any] | None,
                trace: list[dict[str, Any]], expects_json: bool = False) -> AgentOutput:
        trace = trace + [{"step": "generate", "status": result.status, "cached": result.cached,
                          "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens}]
        out = AgentOutput(instance.instance_id, name, repeat, result.text, parsed=parsed, trace=trace,
                          prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens)
        if result.status == "failed":
            out.status, out.error = "failed", result.error
        elif expects_json and parsed is None:
            out.status, out.error = "invalid", "no JSON object in the answer"
        return out
