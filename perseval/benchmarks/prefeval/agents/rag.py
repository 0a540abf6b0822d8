"""prefeval.rag: the top-k exchanges of the conversation retrieved with the question, then the question.

The paper's RAG baseline: the exchanges (the preference turns and the inserted inter-turns, one exchange
a document) most similar to the question are shown before it instead of the whole conversation. The user's
preference turns and the corpus inter-turns are searched apart and merged by score; inter-turns beyond the
instance's setting are not part of its conversation and are dropped (`overfetch` makes room for them).
"""
from __future__ import annotations

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.agents.rag import context_trace, passage_trace
from perseval.benchmarks.prefeval.agents.conversation import answer
from perseval.benchmarks.prefeval.answers import question_text, word_limit
from perseval.kernel.capabilities import Capability
from perseval.kernel.params import Params
from perseval.core.instances import CORPUS_OWNER, AgentOutput, Instance, Passage
from perseval.kernel.registry import register_agent
from perseval.benchmarks.prefeval.views import PrefEvalPayload


class PrefRagParams(Params):
    top_k: int = Field(5, ge=1)  # exchanges shown (the official RAG baseline's 5)
    overfetch: int = Field(4, ge=1)
    passage_chars: int | None = Field(600, ge=1)
    max_tokens: int = Field(300, ge=1)
    word_limit: bool = True  # the official "(Please respond within <max_tokens> words.)" (answers.WORD_LIMIT)
    choice_max_tokens: int = Field(16, ge=1)


def in_conversation(instance: Instance, p: Passage) -> bool:
    """A user passage of the instance's form, or an inter-turn inside its setting."""
    if p.doc_id.startswith("inter-"):
        return int(p.doc_id.split("-", 1)[1]) < PrefEvalPayload.of(instance).inter_turns
    return f":{PrefEvalPayload.of(instance).form}:" in p.doc_id


@register_agent("prefeval.rag")
class PrefRagAgent(Agent[PrefRagParams]):
    benchmarks = ("prefeval",)
    needs = frozenset({Capability.LLM, Capability.RETRIEVE})
    prompt_version = 2  # the generation question ends with the official word limit (answers.WORD_LIMIT)

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None and ctx.retrieve is not None
        k, wide = self.params.top_k, self.params.top_k * self.params.overfetch
        fetched = [*await ctx.retrieve(instance.user_id, instance.query, wide),
                   *await ctx.retrieve(CORPUS_OWNER, instance.query, wide)]
        passages = sorted((p for p in fetched if in_conversation(instance, p)), key=lambda p: -p.score)[:k]
        chars = self.params.passage_chars or max((len(p.text) for p in passages), default=1)
        text = question_text(instance, excerpts=[p.text[:chars] for p in passages], word_limit=word_limit(self.params))
        trace = [passage_trace(instance.query, wide, fetched), context_trace(passages, chars)]
        return await answer(ctx.llm, [{"role": "user", "content": text}], instance, name, repeat,
                            self.params.max_tokens, self.params.choice_max_tokens, trace)
