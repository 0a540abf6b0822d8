"""How a generic agent meets a benchmark's instance: the request it sends and the answer read back.

A benchmark implements `RequestFormat` for its instances; generic agents (no history, RAG) call it without
knowing which benchmark they run. It lives with the agents so that the agent contract depends on no benchmark.
(Not called a task: in perseval a task is a Prefect task, and LaMP's tasks are its datasets.)
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence

from perseval.core.instances import Instance, Passage


@dataclass
class Prompt:
    """What a generic agent sends for one task: the messages, and the JSON schema of a structured answer."""

    messages: list[dict[str, Any]]
    json_schema: dict[str, Any] | None = None


@dataclass
class Answer:
    """An agent's raw text turned into the benchmark's action; `problem` says why it is unusable."""

    parsed: dict[str, Any] | None = None
    problem: str = ""
    repairs: dict[str, Any] = field(default_factory=dict)


class RequestFormat(ABC):
    """A benchmark's instance as generic agents ask for it: how to ask (`prompt`), and how to read the answer.

    `extract` is the benchmark's one answer-extraction step: agents use it to accept or repair an answer,
    and judges use the same function on the same text, so one format never has two parsers.
    """

    @abstractmethod
    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        """The messages for `instance`, with the retrieved history `passages` (may be empty)."""

    @abstractmethod
    def extract(self, instance: Instance, text: str) -> Answer:
        """The action in `text`: parsed structure (None for free text) or the problem that makes it unusable."""
