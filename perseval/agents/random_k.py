"""random_k: k items of the user's history drawn at random (seeded per instance), in the benchmark's own prompt
(its request format builds it): the profile benchmarks' "random" retrieval baseline (LaMP, LaMP-QA, LongLaMP).

A generic agent: it needs the user's documents and a request format, nothing of one benchmark. The
baseline is the same prompt as BM25 or dense top-k (the generic `rag` agent under the bm25 or a dense
retriever), with k items of the user's profile chosen without looking at the input. The draw derives from the run's seed and the instance, so a re-run sends the same prompt. The
paper draws with replacement; this draws k distinct items (all of them when the profile is smaller), so a
short profile does not show one item twice.
"""
from __future__ import annotations

import random

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.agents.rag import answered_output, context_trace, whole
from perseval.core.instances import AgentOutput, Instance, Passage
from perseval.kernel.capabilities import Capability
from perseval.kernel.params import Params
from perseval.kernel.registry import register_agent


class RandomKParams(Params):
    top_k: int = Field(3, ge=1)  # profile items in the prompt
    passage_chars: int | None = Field(600, ge=1)  # characters kept of each item; None: all
    max_tokens: int = Field(64, ge=1)  # of a generated answer
    json_max_tokens: int = Field(24, ge=1)  # of a label answer ({"answer": "based on a book"})


@register_agent("random_k")
class RandomKAgent(Agent[RandomKParams]):
    needs = frozenset({Capability.LLM, Capability.REQUEST_FORMAT, Capability.DOCUMENTS})

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None and ctx.request_format is not None and ctx.documents is not None
        profile = ctx.documents(instance.user_id)
        rng = random.Random(f"{ctx.seed}:{instance.instance_id}:{repeat}")
        drawn = rng.sample(profile, min(self.params.top_k, len(profile)))
        passages = [Passage(d.doc_id, 0, d.text, 0.0) for d in drawn]
        chars = self.params.passage_chars or whole(passages)
        prompt = ctx.request_format.prompt(instance, passages, chars)
        budget = self.params.json_max_tokens if prompt.json_schema else self.params.max_tokens
        result = await ctx.llm.chat(prompt.messages, json_schema=prompt.json_schema, max_tokens=budget, repeat=repeat)
        trace = [{"step": "draw", "k": self.params.top_k, "profile": len(profile)}, context_trace(passages, chars)]
        return answered_output(instance, name, repeat, result, trace, ctx.request_format.extract, prompt.messages)
