"""The contract of a system under test. An agent never knows which judge scores it.

An agent declares what it needs from the run (`requires`, perseval.kernel.capabilities): its backbone (llm),
retrieval over the user's indexed history (retrieve), the user's raw history
(documents), a search back end (search), and the benchmark's request format
(request_format: how to ask and how to read an answer, for agents that are not written
for one benchmark). The runner builds only what is asked for; anything else is
None in the context. Every agent gets the run's seed: an agent that draws randomness derives it from
`ctx.seed`, so the experiment's seed (or its benchmark entry's) decides it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar

from perseval.agents.contract import RequestFormat
from perseval.kernel.capabilities import Capability
from perseval.llm.base import ChatModel
from perseval.kernel.params import Configurable, P
from perseval.core.instances import AgentOutput, Document, Instance, Passage

Retrieve = Callable[[str, str, int], Awaitable[list[Passage]]]  # (owner, query, k) -> passages
Search = Callable[[Instance, str, int], Awaitable[list[Passage]]]  # (instance, query, k) -> results


@dataclass
class AgentContext:
    """What the run gives an agent: only the capabilities it requires are set."""

    llm: ChatModel | None = None
    retrieve: Retrieve | None = None  # dense/sparse retrieval over an owner's indexed history (or the corpus)
    documents: Callable[[str], list[Document]] | None = None  # an owner's full history, in time order
    search: Search | None = None  # the search back end (corpus index, gold information, web)
    request_format: RequestFormat | None = None  # the benchmark's prompt and answer extraction
    seed: int = 0  # the run's seed (the benchmark entry's, or the experiment's): every random draw derives from it
    roles: dict[str, ChatModel] = field(default_factory=dict)  # role models by role (see Agent.role_models)


class Agent(Configurable[P], ABC):
    """`params` is the validated `params:` mapping of the agent's YAML."""

    kind: ClassVar[str]  # set by @register_agent
    benchmarks: ClassVar[tuple[str, ...] | None] = None  # None: any benchmark that has a request format
    needs: ClassVar[frozenset[str]] = frozenset({Capability.LLM})
    reads_gold: ClassVar[bool] = False  # oracle agents only: they are given the instance's gold
    # bump when the agent's prompts change what it sends: its run outputs are keyed on it (from 2 on), so a
    # re-run recomputes them instead of reading outputs its old prompts made
    prompt_version: ClassVar[int] = 1

    def requires(self) -> frozenset[str]:
        """The capabilities this configured agent uses (may depend on params: no retrieval at top_k 0)."""
        return self.needs

    def role_models(self) -> dict[str, str]:
        """Models besides the backbone that this configured agent sends some requests to, by role (e.g. a
        profiler): the experiment loads and serves them, and the run gives them in `AgentContext.roles`."""
        return {}

    def search_spec(self) -> str | dict[str, Any] | None:
        """Which search back end to bind when the agent requires `search` (see perseval.retrieval.search)."""
        return None

    @abstractmethod
    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        """Produce the final action for one instance. Failures are data: status 'failed'/'invalid'."""
