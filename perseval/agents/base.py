"""The contract of a system under test. An agent never knows which judge scores it."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar

from perseval.llm.base import ChatModel
from perseval.records import AgentOutput, Document, Instance, Passage

Retrieve = Callable[[str, str, int], Awaitable[list[Passage]]]  # (owner, query, k) -> passages


@dataclass
class AgentContext:
    """What an agent may use: its backbone, the user's history, the search back end."""

    llm: ChatModel | None
    retrieve: Retrieve  # dense retrieval over an owner's indexed history (or the corpus)
    documents: Callable[[str], list[Document]]  # an owner's full history, in time order
    search: Callable[[Instance, str, int], Awaitable[list[Passage]]] | None = None  # Bespoke web/corpus/gold search
    extra: dict[str, Any] = field(default_factory=dict)


class Agent(ABC):
    """`params` is the `params:` mapping of the agent's YAML."""

    kind: ClassVar[str]  # set by @register_agent
    benchmarks: ClassVar[tuple[str, ...]]
    uses_llm: ClassVar[bool] = True
    reads_gold: ClassVar[bool] = False  # oracle agents only: they are given the instance's gold

    def __init__(self, params: dict[str, Any] | None = None):
        self.params = dict(params or {})

    @abstractmethod
    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        """Produce the final action for one instance. Failures are data: status 'failed'/'invalid'."""
