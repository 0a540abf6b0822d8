"""Components as the plan carries them: a registered kind with its params validated once, when the
experiment is loaded (perseval.experiment.load), so that a stage builds it with no second validation."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perseval.judges.base import JudgeBinding
from perseval.kernel.capabilities import Capability
from perseval.llm.base import ChatModel
from perseval.llm.settings import ModelConfig, Sampling
from perseval.kernel.params import Params
from perseval.kernel.registry import benchmark_class, judge_class


@dataclass(frozen=True)
class AgentSpec:
    """An agent YAML resolved: its kind, validated params, the capabilities it uses with these params
    (`Agent.requires()`) and the search back end it binds when it searches."""

    name: str
    kind: str
    params: Params
    needs: frozenset[Capability]
    search: str | dict[str, Any] | None = None
    roles: dict[str, str] = field(default_factory=dict)  # role -> model name besides the backbone (a profiler)
    prompt_version: int = 1  # Agent.prompt_version of its kind


@dataclass(frozen=True)
class JudgeSpec:
    """One judge binding of a benchmark entry: the name in the tables, the judge kinds it runs with their
    validated params, and, for a judge bound to a model, the model with the judge role's sampling."""

    name: str
    kinds: tuple[str, ...]
    params: dict[str, Params] = field(default_factory=dict)  # kind -> validated params
    model: ModelConfig | None = None
    sampling: Sampling | None = None  # the judge role's sampling: set exactly when `model` is
    repeats: int = 1
    uses_llm: bool = False  # some kind asks a model (then `model` is set)
    threshold: float = 0.5  # P(true) at which a binary verdict read from probabilities passes
    reasons: bool = True  # a binary verdict comes with its one-sentence reason (judge YAML `reasons`)
    # `threshold: calibrated`: the cells are scored at the threshold the probe stage chose on the probe set
    # (perseval.pipeline.probes); the judge stage reads its verdicts at `threshold` (0.5) meanwhile, and every
    # judgment keeps its P(true) for the score stage to read again
    calibrated: bool = False

    def __post_init__(self) -> None:
        if (self.model is None) != (self.sampling is None):
            raise ValueError(f"judge {self.name!r}: a model comes with its sampling, and sampling with a model")

    def bindings(self, model: ChatModel | None = None) -> list[JudgeBinding]:
        """The judge role as its judges see it: one binding per judge repeat (one for a rule judge)."""
        if model is None:
            return [JudgeBinding(self.name)]
        return [JudgeBinding(self.name, model, r, self.threshold, self.reasons) for r in range(self.repeats)]

    def probed_on(self, benchmark: str) -> bool:
        """Whether this judge asks a model about items of `benchmark` whose verdict a probe knows."""
        probed = benchmark_class(benchmark).probed_items
        return self.uses_llm and self.model is not None and any(judge_class(k).item in probed for k in self.kinds)

    def params_json(self) -> dict[str, dict[str, Any]]:
        return {k: p.model_dump(mode="json") for k, p in self.params.items()}
