"""A scripted stand-in for a ChatModel, for unit tests of prompts, parsing and scoring logic.

Integration tests use the real embedded server; this only replaces the model
where a test checks what perseval does with a given answer.
"""
from __future__ import annotations

from typing import Any, Callable

from perseval.llm.base import ChatResult


class ScriptedChat:
    def __init__(self, answer: str | Callable[[list[dict[str, Any]]], str] | list[str], name: str = "scripted"):
        self.name = name
        self._answer = answer
        self.calls: list[dict[str, Any]] = []

    async def chat(self, messages, *, json_schema=None, max_tokens=None, temperature=None, repeat=0, tools=None,
                   logprobs=None):
        self.calls.append({"messages": messages, "json_schema": json_schema, "repeat": repeat, "max_tokens": max_tokens,
                           "logprobs": logprobs})
        if callable(self._answer):
            text = self._answer(messages)
        elif isinstance(self._answer, list):
            text = self._answer[min(len(self.calls) - 1, len(self._answer) - 1)]
        else:
            text = self._answer
        if text is None:
            return ChatResult(text="", status="failed", error="scripted failure")
        return ChatResult(text=text, prompt_tokens=10, completion_tokens=5)
