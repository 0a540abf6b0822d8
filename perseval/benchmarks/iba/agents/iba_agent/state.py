"""The state of one IBA-Agent run: what was gathered so far, the trace, and the token bill per stage.

Every LLM request goes through `State.ask`, so a failed request anywhere ends
the run the same way (StageFailed, partial trace kept) and no stage can forget
to count its tokens.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from perseval.agents.base import AgentContext
from perseval.benchmarks.iba.agents.iba_agent.settings import Settings
from perseval.benchmarks.views import ActionPayload
from perseval.llm.base import ChatModel, ChatResult
from perseval.core.instances import AgentOutput, Instance, Passage


class StageFailed(Exception):
    """A stage could not complete (failed LLM request or retrieval error); the run stops as 'failed'."""

    def __init__(self, step: str, error: str):
        super().__init__(f"{step}: {error}")
        self.step, self.error = step, error


@dataclass
class Scored:
    """A passage and its salience score (None: not re-ranked, or the score could not be parsed)."""

    passage: Passage
    salience: int | None = None


@dataclass
class Final:
    """The final output head's result."""

    text: str
    parsed: dict[str, Any] | None = None
    invalid: str = ""  # why the output is unusable, when it is


@dataclass
class State:
    instance: Instance
    ctx: AgentContext
    settings: Settings
    repeat: int
    trace: list[dict[str, Any]] = field(default_factory=list)
    retrievals: list[list[Passage]] = field(default_factory=list)  # one list per query, in call order
    queries: list[str] = field(default_factory=list)  # expanded queries
    kept: list[Scored] | None = None  # the evidence context C_u(x); None until selected
    evidence: str | None = None  # the compact evidence, made once (alignment.compact_evidence)
    evidence_held: list[Scored] = field(default_factory=list)  # the kept passages it holds
    preferences: list[str] | None = None
    plan: str | None = None
    final: Final | None = None
    tokens: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

    @property
    def llm(self) -> ChatModel:
        assert self.ctx.llm is not None  # checked by the agent before any stage runs
        return self.ctx.llm

    @cached_property
    def payload(self) -> ActionPayload:
        """The instance's action and API, read once per run."""
        return ActionPayload.of(self.instance)

    @property
    def action_type(self) -> str:
        return self.payload.action_type

    def log(self, step: str, **fields: Any) -> dict[str, Any]:
        entry = {"step": step, **fields}
        self.trace.append(entry)
        return entry

    async def ask(self, step: str, messages: list[dict[str, Any]], *, max_tokens: int,
                  json_schema: dict[str, Any] | None = None,
                  tools: list[dict[str, Any]] | None = None) -> ChatResult:
        """One LLM request of `step`; its tokens are billed to the step; a failure raises StageFailed."""
        result = await self.llm.chat(messages, json_schema=json_schema, max_tokens=max_tokens,
                                     repeat=self.repeat, tools=tools)
        bill = self.tokens[step]
        bill[0] += result.prompt_tokens
        bill[1] += result.completion_tokens
        if result.status == "failed":
            self.log(step, status="failed", error=result.error)
            raise StageFailed(step, result.error or "request failed")
        return result

    def output(self, name: str, error: StageFailed | None = None) -> AgentOutput:
        self.log("tokens", by_stage={k: {"prompt_tokens": v[0], "completion_tokens": v[1]}
                                     for k, v in self.tokens.items()})
        prompt = sum(v[0] for v in self.tokens.values())
        completion = sum(v[1] for v in self.tokens.values())
        out = AgentOutput(self.instance.instance_id, name, self.repeat, "", trace=self.trace,
                          prompt_tokens=prompt, completion_tokens=completion)
        if error is not None:
            out.status, out.error = "failed", str(error)
        elif self.final is None:
            out.status, out.error = "failed", "the run ended without a final output"
        else:
            out.text, out.parsed = self.final.text, self.final.parsed
            if self.final.invalid:
                out.status, out.error = "invalid", self.final.invalid
        return out


