"""From configs to components: validated params, judge bindings, constructed objects.

Everything here goes through the registries, so a component added as one
module plus one YAML (or by a plugin) is found, validated and built with no
edit to the plan, a benchmark or a flow. Every check runs when the experiment
is loaded, before any server starts; each error names the file and the key.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from perseval.config import AgentConfig, BenchmarkEntry, ResolvedExperiment, RetrieverConfig, Sampling
from perseval.errors import ConfigError
from perseval.params import Params, validate_params
from perseval.registry import (agent_class, benchmark_class, judge_class, load_plugins, resolve_plugins,
                               retriever_class)


def _lookup(get: Any, name: str, where: str, key: str) -> type:
    try:
        return get(name)
    except ConfigError as exc:
        raise ConfigError(f"{where}: key '{key}': {exc}") from None


# --- loading ---------------------------------------------------------------------------------------

def load_experiment_plugins(specs: Sequence[str], experiment_path: Path) -> tuple[str, ...]:
    """Import the experiment's `plugins:` (modules or .py files relative to the experiment file)."""
    resolved = resolve_plugins(specs, experiment_path.resolve().parent)
    load_plugins(resolved)
    return resolved


def benchmark_params(entry: BenchmarkEntry, where: str, index: int) -> Params:
    cls = _lookup(benchmark_class, entry.name, where, f"benchmarks.{index}.name")
    return validate_params(cls.Params, entry.params, where, prefix=f"benchmarks.{index}.params")


def construction_models(entry: BenchmarkEntry, backbones: Sequence[str], where: str = "", index: int = 0) -> dict[str, str]:
    """Role -> model name of the models a benchmark entry's build needs (LLM-mode construction)."""
    params = benchmark_params(entry, where, index)
    return benchmark_class(entry.name).construction_models(params, backbones)


def agent_role_models(cfg: AgentConfig, where: str) -> dict[str, str]:
    """Role -> model name of the models a configured agent uses besides its backbone (Agent.role_models)."""
    return make_agent(cfg, where).role_models()


# --- judges bound to a benchmark entry ---------------------------------------------------------------

@dataclass
class JudgeSpec:
    """One judge binding of a benchmark entry: the name in the tables, the judge kinds it runs (with their
    params), and, for LLM judges, the model, sampling and repeats."""

    name: str
    kinds: tuple[str, ...]
    params: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> validated params (dumped)
    model: str | None = None
    sampling: Sampling | None = None
    repeats: int = 1

    @property
    def uses_llm(self) -> bool:
        return any(judge_class(k).uses_llm for k in self.kinds)


def _other_kind(kind: str, bench: str) -> bool:
    """Whether `kind` is a registered judge kind of a benchmark other than `bench`."""
    try:
        return judge_class(kind).benchmark != bench
    except ConfigError:
        return False


def _spec(exp: ResolvedExperiment, name: str, bench: str) -> JudgeSpec | None:
    """The binding of judge `name` on benchmark `bench`, or None when it judges another benchmark."""
    cfg = exp.judges[name]
    where = exp.file_of("judges", name)
    bench_cls = benchmark_class(bench)
    if cfg.kind is None:
        if not bench_cls.llm_judges:
            return None
        # a judge YAML shared by several benchmarks holds each one's kinds; only a kind of none is a typo
        own = (*bench_cls.llm_judges, *bench_cls.optional_llm_judges)
        unknown = sorted(k for k in set(cfg.params) - set(own) if not _other_kind(k, bench))
        if unknown:
            raise ConfigError(f"{where}: key 'params': without `kind` params are keyed by judge kind; {unknown} "
                              f"is not one of {list(own)}")
        raw = {k: cfg.params.get(k, {}) for k in bench_cls.llm_judges}
        raw.update({k: cfg.params[k] for k in bench_cls.optional_llm_judges if k in cfg.params})
    else:
        cls = _lookup(judge_class, cfg.kind, where, "kind")
        if cls.benchmark != bench:
            return None
        raw = {cfg.kind: cfg.params}
    params = {k: validate_params(judge_class(k).Params, p, where, prefix="params" if cfg.kind else f"params.{k}")
              .model_dump(mode="json") for k, p in raw.items()}
    spec = JudgeSpec(name, tuple(raw), params, cfg.model, cfg.sampling, cfg.repeats)
    if spec.uses_llm and not cfg.model:
        raise ConfigError(f"{where}: key 'model': judge kind(s) {list(spec.kinds)} need a model")
    return spec


def judge_specs(exp: ResolvedExperiment, index: int) -> list[JudgeSpec]:
    """The judges of benchmark entry `index`: its configured ones that fit it, then the benchmark's rule
    judges for the kinds no configured judge covers."""
    entry = exp.experiment.benchmarks[index]
    bench_cls = benchmark_class(entry.name)
    names = entry.judges if entry.judges is not None else exp.experiment.judges
    specs = []
    for name in names:
        spec = _spec(exp, name, entry.name)
        if spec is None and entry.judges is not None:
            raise ConfigError(f"{exp.path}: key 'benchmarks.{index}.judges': judge {name!r} does not judge "
                              f"benchmark {entry.name!r}")
        if spec is not None:
            specs.append(spec)
    covered = {k for s in specs for k in s.kinds}
    specs += [JudgeSpec(k, (k,), {k: validate_params(judge_class(k).Params, {}, k).model_dump(mode="json")})
              for k in bench_cls.rule_judges if k not in covered]
    if bench_cls.llm_judges and not covered & set(bench_cls.llm_judges):
        raise ConfigError(f"{exp.path}: benchmark {entry.name!r} needs an LLM judge for {list(bench_cls.llm_judges)}:"
                          " list a judge under `judges:`")
    return specs


# --- validating a whole experiment ---------------------------------------------------------------------

def validate_experiment(exp: ResolvedExperiment) -> None:
    """Every component's kind and params, agent/benchmark fit and judge bindings; raises ConfigError."""
    for i, entry in enumerate(exp.experiment.benchmarks):
        benchmark_params(entry, exp.path, i)
        for name in entry.agents:
            agent = make_agent(exp.agents[name], exp.file_of("agents", name))
            if agent.benchmarks is not None and entry.name not in agent.benchmarks:
                raise ConfigError(f"{exp.path}: agent {name!r} ({agent.kind}) does not support benchmark "
                                  f"{entry.name!r} (it runs {list(agent.benchmarks)})")
            if agent.benchmarks is None and benchmark_class(entry.name).task_format is None:
                raise ConfigError(f"{exp.path}: agent {name!r} ({agent.kind}) needs a benchmark task format, which "
                                  f"{entry.name!r} does not have")
        judge_specs(exp, i)
    for name in exp.experiment.judges:
        if not any(_spec(exp, name, e.name) for e in exp.experiment.benchmarks):
            raise ConfigError(f"{exp.path}: key 'judges': judge {name!r} judges none of the experiment's benchmarks")
    for name, cfg in exp.retrievers.items():
        make_retriever(cfg, exp.file_of("retrievers", name))


# --- checking the input folders an experiment names -----------------------------------------------------

def source_problems(exp: ResolvedExperiment) -> list[str]:
    """One line per problem of every benchmark entry's `source:` (file, row, field, what was expected),
    found by the benchmarks' own readers before any server starts; empty when every source reads."""
    problems = []
    for i, entry in enumerate(exp.experiment.benchmarks):
        if entry.source:
            params = benchmark_params(entry, exp.path, i)
            problems += benchmark_class(entry.name).validate_source(Path(entry.source), params)
    return problems


# --- constructing components ---------------------------------------------------------------------------

def make_benchmark(name: str, params: Mapping[str, Any] | Params) -> Any:
    return benchmark_class(name)(params)


def make_agent(cfg: AgentConfig, where: str | None = None) -> Any:
    cls = _lookup(agent_class, cfg.kind, where or f"agent {cfg.name!r}", "kind")
    return cls(validate_params(cls.Params, cfg.params, where or f"agent {cfg.name!r}"))


def make_retriever(cfg: RetrieverConfig, where: str | None = None, **kwargs: Any) -> Any:
    cls = _lookup(retriever_class, cfg.kind, where or f"retriever {cfg.name!r}", "kind")
    return cls(validate_params(cls.Params, cfg.params, where or f"retriever {cfg.name!r}"), cfg.chunking, **kwargs)


def make_judges(spec: JudgeSpec) -> list[Any]:
    return [judge_class(k)(spec.params.get(k, {})) for k in spec.kinds]
