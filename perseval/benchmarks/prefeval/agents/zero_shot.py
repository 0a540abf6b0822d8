"""prefeval.zero_shot: the whole conversation (preference turns, inter-turns), then the question.

The paper's zero-shot baseline; with `reminder: true` the question carries a reminder to respect the
preferences stated earlier (the paper's reminder baseline). Both read the conversation through
`documents`, so the swapped-history control gives them another user's preference turns.
"""
from __future__ import annotations

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.prefeval.agents.conversation import answer, conversation
from perseval.benchmarks.prefeval.answers import question_text, word_limit
from perseval.kernel.capabilities import Capability
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent


class ZeroShotParams(Params):
    reminder: bool = False
    context_tokens: int | None = Field(None, ge=1)  # None: the whole conversation (the paper clips nothing)
    max_tokens: int = Field(300, ge=1)  # of a generation answer (the official scripts' 300)
    # the official generation scripts end the question with "(Please respond within <max_tokens> words.)"
    word_limit: bool = True
    choice_max_tokens: int = Field(16, ge=1)  # of a classification answer under its JSON schema


@register_agent("prefeval.zero_shot")
class ZeroShotAgent(Agent[ZeroShotParams]):
    benchmarks = ("prefeval",)
    needs = frozenset({Capability.LLM, Capability.DOCUMENTS})
    prompt_version = 2  # the generation question ends with the official word limit (answers.WORD_LIMIT)

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.llm is not None and ctx.documents is not None
        history, step = conversation(instance, ctx.documents, self.params.context_tokens)
        messages = [*history, {"role": "user", "content": question_text(instance, reminder=self.params.reminder,
                                                                        word_limit=word_limit(self.params))}]
        return await answer(ctx.llm, messages, instance, name, repeat, self.params.max_tokens,
                            self.params.choice_max_tokens, [step])
