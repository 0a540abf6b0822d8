"""persona_mem.long_context: the whole context before the question as chat turns, then the question.

The paper's setting: the model reads the user's multi-session history as it happened. `context_tokens`
clips it to the model's budget by keeping the latest whole messages (None: the whole context, for models
whose window holds the split); how much was dropped is in the trace.
"""
from __future__ import annotations

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.persona_mem.agents.ask import ask_choice
from perseval.benchmarks.persona_mem.agents.context import as_messages, clip, system_first, visible
from perseval.benchmarks.persona_mem.answers import question_message
from perseval.kernel.capabilities import Capability
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent


class LongContextParams(Params):
    context_tokens: int | None = Field(None, ge=1)  # budget of the history in the prompt; None: all of it
    max_tokens: int = Field(16, ge=1)  # of the answer ({"answer": "c"} is about 6 tokens)


@register_agent("persona_mem.long_context")
class LongContextAgent(Agent[LongContextParams]):
    benchmarks = ("persona_mem",)
    needs = frozenset({Capability.LLM, Capability.DOCUMENTS})

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None and ctx.documents is not None
        history = as_messages(visible(instance, ctx.documents(instance.user_id)))
        kept, dropped = clip(history, self.params.context_tokens)
        trace = [{"step": "context", "messages": len(history), "kept": len(kept), "dropped": dropped,
                  "chars": sum(len(m["content"]) for m in kept)}]
        messages = system_first([*kept, question_message(instance)])
        return await ask_choice(ctx.llm, messages, instance, name, repeat, self.params.max_tokens, trace)
