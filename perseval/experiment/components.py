"""Building components: a registered class from its kind and already validated params.

Validation happens once, when the experiment is loaded (perseval.experiment.load); a stage builds each
component it uses from the unit's spec, with no second validation. Everything goes through the
registries, so a component added as one module plus one YAML (or by a plugin) is built with no edit to
the plan, a benchmark or a flow.
"""
from __future__ import annotations

from typing import Any, Mapping

from perseval.retrieval.settings import RetrieverConfig
from perseval.core.errors import ConfigError
from perseval.kernel.params import Params, validate_params
from perseval.kernel.registry import agent_class, benchmark_class, judge_class, retriever_class
from perseval.experiment.specs import AgentSpec, JudgeSpec


def lookup(get: Any, name: str, where: str, key: str) -> type:
    """A registered class, or a ConfigError naming the file and key that named it."""
    try:
        return get(name)
    except ConfigError as exc:
        raise ConfigError(f"{where}: key '{key}': {exc}") from None


def make_benchmark(name: str, params: Params | Mapping[str, Any]) -> Any:
    """A benchmark from its params: validated ones are used as they are (a mapping is validated here)."""
    return benchmark_class(name)(params)


def make_agent(spec: AgentSpec) -> Any:
    return agent_class(spec.kind)(spec.params)


def make_retriever(cfg: RetrieverConfig, params: Params | None = None, where: str | None = None, **kwargs: Any) -> Any:
    """A retriever from its YAML; `params` are its validated params (validated here when not given)."""
    cls = lookup(retriever_class, cfg.kind, where or f"retriever {cfg.name!r}", "kind")
    if params is None:
        params = validate_params(cls.Params, cfg.params, where or f"retriever {cfg.name!r}")
    return cls(params, cfg.chunking, **kwargs)


def make_judges(spec: JudgeSpec) -> list[Any]:
    return [judge_class(k)(spec.params[k]) for k in spec.kinds]
