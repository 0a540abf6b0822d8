"""What one LLM client sent and what its request cache answered: the tally perseval.pipeline.cost sums into
a cell's cost. It lives beside the client that fills it, so the client needs nothing of the pipeline. And
what an agent's trace entry records of one request: its usage and duration (trace_fields) and its prompt
(prompt_record)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from perseval.llm.base import ChatResult


def trace_fields(result: ChatResult) -> dict[str, Any]:
    """The per-request fields an agent writes into its trace entry for one LLM call; latency_s is what the
    request took when it was sent (a cache hit keeps the original's), so a trace shows each step's duration."""
    return {"status": result.status, "cached": result.cached, "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens, "latency_s": round(result.latency_s, 3)}


PROMPT_CHARS, PROMPT_MESSAGES = 2000, 8  # what a trace keeps of a prompt: a long chat keeps its first and last


def prompt_record(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The prompt as the trace shows it: the first message (the instructions) and the last ones, each clipped,
    and how many were left out, so a 32k-token chat history does not fill the run's records."""
    kept = messages if len(messages) <= PROMPT_MESSAGES else [messages[0], *messages[1 - PROMPT_MESSAGES:]]
    clipped = [{**m, "content": m["content"][:PROMPT_CHARS]} if isinstance(m.get("content"), str) else m
               for m in kept]
    return {"messages": clipped, **({"messages_left_out": len(messages) - len(kept)} if len(kept) < len(messages)
                                    else {})}


@dataclass
class Usage:
    """One client's (or a unit's) requests: sent ones with their usage, cache hits with their original usage."""

    requests: int = 0  # sent and answered
    failed: int = 0  # sent, failed after retries (their seconds count, they have no tokens)
    tokens_in: int = 0
    tokens_out: int = 0
    llm_seconds: float = 0.0  # request latency summed (overlapping requests each count their own)
    cached: int = 0  # answered by the request cache: no new tokens
    cached_tokens_in: int = 0
    cached_tokens_out: int = 0
    cached_llm_seconds: float = 0.0

    def record(self, result: ChatResult) -> None:
        if result.cached:
            self.cached += 1
            self.cached_tokens_in += result.prompt_tokens
            self.cached_tokens_out += result.completion_tokens
            self.cached_llm_seconds += result.latency_s
            return
        if result.status == "failed":
            self.failed += 1
        else:
            self.requests += 1
        self.tokens_in += result.prompt_tokens
        self.tokens_out += result.completion_tokens
        self.llm_seconds += result.latency_s

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    @classmethod
    def of(cls, data: dict[str, Any]) -> "Usage":
        return cls(**{f.name: data.get(f.name, 0) for f in fields(cls)})
