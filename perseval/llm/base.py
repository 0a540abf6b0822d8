"""What agents and judges see of a model: a chat call, nothing about its server."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass
class ChatResult:
    text: str
    status: Literal["ok", "failed"] = "ok"
    error: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False  # answered by the request cache: the usage and latency are the original request's
    latency_s: float = 0.0  # seconds the request took (perseval.pipeline.cost sums them)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # asked with `logprobs`: per generated token, its text and its top alternatives {token: logprob}
    # (perseval.judges.verdict_prob reads a verdict's P(true) from them); None when the server returned none
    token_logprobs: list[dict[str, Any]] | None = None


class ChatModel(Protocol):
    """A model bound to a role (backbone or judge). Sampling defaults come from its YAML."""

    name: str

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        json_schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        repeat: int = 0,
        tools: list[dict[str, Any]] | None = None,
        logprobs: int | None = None,
    ) -> ChatResult:
        """One chat completion; never raises for a failed request (status='failed'). `logprobs`: ask for that
        many top alternatives of every generated token (ChatResult.token_logprobs)."""
        ...
