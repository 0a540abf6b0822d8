"""Resolving an experiment once: names to configs, plugins, every component's params, judge bindings.

`load_experiment` reads an experiment file and every config it references by name
(`configs/<kind>/<name>.yaml`), imports its plugins, and validates every
component's `params` against the component's own model, once, failing early with
the file and the key. What it validated is kept (`bound(exp)`): the plan carries
it to the stages, which build components from it with no second validation.
Every check runs here, before any server starts.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection

from perseval.experiment import checks
from perseval.kernel.capabilities import capabilities
from perseval.experiment.components import lookup
from perseval.llm.settings import DEPLOYMENT_FORMATS, DeploymentConfig, ModelConfig
from perseval.retrieval.settings import RetrieverConfig
from perseval.experiment.config import (AgentConfig, BenchmarkEntry, ExperimentConfig, JudgeConfig, ResolvedExperiment,
                                        load_config)
from perseval.core import files
from perseval.core.errors import ConfigError
from perseval.core.suggest import suggestion
from perseval.experiment.overrides import CALIBRATED, THRESHOLDS, apply_overrides
from perseval.kernel.params import Params, Strict, validate_params
from perseval.kernel.registry import (BENCHMARKS, agent_class, benchmark_class, judge_class, load_plugins, resolve_plugins,
                               retriever_class)
from perseval.experiment.specs import AgentSpec, JudgeSpec

# The configs perseval ships that no one benchmark owns (models, deployments, retrievers, generic agents and
# judges, cross-benchmark experiments), for experiment files kept elsewhere.
SHIPPED_CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# Each benchmark keeps its own agents, judges and experiments in its folder: perseval/benchmarks/<name>/configs/.
BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


@dataclass
class Bound:
    """What `load_experiment` validated, typed: the plan's units carry these to the stages."""

    benchmarks: list[Params]  # benchmark entry index -> the entry's validated params
    agents: dict[str, AgentSpec]
    judges: list[list[JudgeSpec]]  # benchmark entry index -> its judge bindings
    retrievers: dict[str, Params]


# --- where named configs are found -------------------------------------------------------------------

def config_root_for(experiment_path: Path) -> Path:
    """configs/experiments/x.yaml -> configs/ (the folder holding models/, retrievers/, ...)."""
    parent = experiment_path.resolve().parent
    return parent.parent if parent.name == "experiments" else parent


def benchmark_config_roots() -> list[Path]:
    """The configs/ folder of every benchmark folder: perseval's own, then those of benchmark plugins (the
    folder beside the module that registers a benchmark), so a benchmark added as one folder brings its
    agents, judges and experiments with it."""
    own = sorted(p for p in BENCHMARKS_DIR.glob("*/configs") if p.is_dir())
    plugins = sorted({Path(inspect.getfile(cls)).resolve().parent / "configs"
                      for cls in BENCHMARKS.table.values() if not cls.__module__.startswith("perseval.")})
    return own + [p for p in plugins if p.is_dir() and p not in own]


def config_roots(experiment_path: Path, config_root: str | Path | None = None) -> list[Path]:
    """Where named configs are looked up, first hit wins: the experiment's own root (a user's file of
    the same name overrides a shipped one), then perseval's shipped configs, then each benchmark folder's, so
    an experiment file written in the user's own folder can name `smollm2-135m` or `iba-agent` without
    copying them. Call it after the experiment's plugins are loaded: a plugin benchmark's folder counts."""
    own = (Path(config_root) if config_root else config_root_for(experiment_path)).resolve()
    shipped = [p for p in (SHIPPED_CONFIGS, *benchmark_config_roots()) if p.is_dir() and p.resolve() != own]
    return [own, *shipped]


def experiment_file(name: str, own: Path | None = None) -> Path:
    """The experiment file called `name`: <own>/experiments/<name>.yaml first (a user's config folder), then the
    shipped configs/experiments/ and the experiments/ folder of the benchmark that owns it; a ConfigError
    listing the known names otherwise."""
    shipped = [SHIPPED_CONFIGS / "experiments", *(root / "experiments" for root in benchmark_config_roots())]
    folders = ([own / "experiments"] if own is not None else []) + shipped
    for folder in folders:
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    known = sorted({p.stem for folder in folders for p in folder.glob("*.yaml")})
    raise ConfigError(f"no experiment file named {name!r} ({suggestion(name, known)})")


class _Resolver:
    """Loads each named config once, remembering which file it came from."""

    def __init__(self, roots: list[Path]):
        self.roots = roots
        self.files: dict[str, str] = {}

    def known(self, kind: str) -> list[str]:
        return sorted({p.stem for root in self.roots for p in (root / kind).glob("*.yaml")})

    def named(self, kind: str, model: type[Strict], name: str, referrer: Path | str, key: str) -> Any:
        if not plain_name(name):  # `../x` or `a/b` would be read from outside configs/<kind>/
            raise ConfigError(f"{referrer}: key '{key}': {name!r} is not a plain name: a name is the file name of "
                              f"configs/{kind}/<name>.yaml, without a folder, '..' or a path separator (known: "
                              f"{self.known(kind)})")
        tried = [root / kind / f"{name}.yaml" for root in self.roots]
        path = next((p for p in tried if p.is_symlink() or p.exists()), None)  # a link loop is named by the read
        if path is None:
            known = self.known(kind)
            missing = " or ".join(str(p) for p in tried)
            raise ConfigError(f"{referrer}: key '{key}' names {name!r}, but there is no {missing} "
                              f"({suggestion(name, known)})")
        cfg = load_config(model, path)
        if cfg.name != name:
            raise ConfigError(f"{path}: key 'name' is {cfg.name!r} but the file is named {name!r}")
        self.files[f"{kind}/{name}"] = str(path)
        return cfg


def plain_name(name: str) -> bool:
    """A config's name is a file name under configs/<kind>/: no folder part, no '..', nothing hidden."""
    return bool(name) and "/" not in name and "\\" not in name and "\0" not in name and not name.startswith(".")


# --- loading -------------------------------------------------------------------------------------------

def load_experiment(path: str | Path, config_root: str | Path | None = None) -> ResolvedExperiment:
    """Load an experiment file, every config it references by name, and validate every component's params."""
    path = Path(path)
    exp: ExperimentConfig = load_config(ExperimentConfig, path)
    plugins = resolve_plugins(exp.plugins, path.resolve().parent, str(path))
    load_plugins(plugins, str(path))
    for i, bench in enumerate(exp.benchmarks):  # loaded first: a benchmark plugin's folder holds its configs
        lookup(benchmark_class, bench.name, str(path), f"benchmarks.{i}.name")
    res = _Resolver(config_roots(path, config_root))
    models: dict[str, ModelConfig] = {}

    def need_model(name: str, referrer: Path | str, key: str) -> None:
        if name not in models:
            models[name] = res.named("models", ModelConfig, name, referrer, key)

    for name in exp.backbones:
        need_model(name, path, "backbones")
    judge_names = list(dict.fromkeys(exp.judges + [j for b in exp.benchmarks for j in (b.judges or [])]))
    judges = {n: res.named("judges", JudgeConfig, n, path, "judges") for n in judge_names}
    for j in judges.values():
        if j.model:
            need_model(j.model, res.files[f"judges/{j.name}"], "model")
    retrievers = {n: res.named("retrievers", RetrieverConfig, n, path, "retrievers") for n in exp.retrievers}
    agents: dict[str, AgentConfig] = {}
    bench_params = []
    for i, bench in enumerate(exp.benchmarks):
        if bench.source and (problem := files.path_problem(bench.source, "any")):
            raise ConfigError(f"{path}: key 'benchmarks.{i}.source': {bench.source!r} "
                              f"{'does not exist' if problem == 'missing' else problem} (a relative path is read from "
                              "the folder perseval runs in)")
        for name in bench.agents:
            agents[name] = res.named("agents", AgentConfig, name, path, f"benchmarks.{i}.agents")
        params = benchmark_params(bench, str(path), i)
        bench_params.append(params)
        for role, name in benchmark_class(bench.name).construction_models(params, exp.backbones).items():
            need_model(name, path, f"benchmarks.{i}.params.construction.{role}_model")
    models, judges, agents = apply_overrides(exp.overrides, str(path), models, judges, agents, res)
    specs = {name: agent_spec(cfg, res.files[f"agents/{name}"]) for name, cfg in agents.items()}
    for name, spec in specs.items():  # models an agent uses besides its backbone (a profiler), served too
        for role, model in spec.roles.items():
            key = f"overrides.agents.{name}.{role}_model" if name in exp.overrides.agents else f"params.{role}_model"
            need_model(model, path if name in exp.overrides.agents else res.files[f"agents/{name}"], key)
    deployments = {m: _deployment(res, exp, path, cfg) for m, cfg in models.items()}
    resolved = ResolvedExperiment(path=str(path), experiment=exp, models=models, deployments=deployments,
                                  retrievers=retrievers, judges=judges, agents=agents, plugins=plugins,
                                  files=res.files)
    checks.check_experiment(resolved, res.roots)  # degenerate or repeated settings (no cells, a name twice, a bad GGUF)
    resolved._bound = bind(resolved, bench_params, specs)
    checks.check_cells(resolved, resolved._bound.agents, res.roots)
    return resolved


def _deployment(res: _Resolver, exp: ExperimentConfig, path: Path, model: ModelConfig) -> DeploymentConfig:
    override = exp.deployments.get(model.name)
    referrer, key = (path, f"deployments.{model.name}") if override else \
        (res.files[f"models/{model.name}"], "deployment")
    dep: DeploymentConfig = res.named("deployments", DeploymentConfig, override or model.deployment, referrer, key)
    if DEPLOYMENT_FORMATS[dep.kind] != model.format:
        raise ConfigError(f"{referrer}: key '{key}': a {dep.kind} deployment serves {DEPLOYMENT_FORMATS[dep.kind]} "
                          f"models, but model {model.name!r} has format {model.format!r}")
    if model.price and model.price.per_gpu_hour and dep.kind == "openai":
        raise ConfigError(f"{res.files[f'models/{model.name}']}: key 'price.per_gpu_hour': model {model.name!r} is "
                          f"served by the openai endpoint {dep.name!r}, which bills tokens, not GPU hours; give "
                          "input_per_mtok / output_per_mtok")
    return dep


def benchmark_params(entry: BenchmarkEntry, where: str, index: int) -> Params:
    cls = lookup(benchmark_class, entry.name, where, f"benchmarks.{index}.name")
    return validate_params(cls.Params, entry.params, where, prefix=f"benchmarks.{index}.params")


# --- binding: every component validated once -----------------------------------------------------------

def bound(exp: ResolvedExperiment) -> Bound:
    """The experiment's validated components (validated now for an experiment not made by load_experiment)."""
    if exp._bound is None:
        exp._bound = bind(exp)
    return exp._bound


def bind(exp: ResolvedExperiment, bench_params: list[Params] | None = None,
         agents: dict[str, AgentSpec] | None = None) -> Bound:
    """Every component's kind and params, agent/benchmark fit and judge bindings; raises ConfigError.
    `bench_params` / `agents`: those already validated while loading (each is validated once)."""
    entries = exp.experiment.benchmarks
    benchmarks = bench_params or [benchmark_params(e, exp.path, i) for i, e in enumerate(entries)]
    agents = agents or {name: agent_spec(cfg, exp.file_of("agents", name)) for name, cfg in exp.agents.items()}
    for entry in entries:
        for name in entry.agents:
            _check_fit(exp, agents[name], entry)
    specs = _JudgeSpecs(exp)
    judges = [specs.of_entry(i) for i in range(len(entries))]
    for name in exp.experiment.judges:
        if not any(specs.spec(name, e.name) for e in entries):
            raise ConfigError(f"{exp.path}: key 'judges': judge {name!r} judges none of the experiment's benchmarks")
    retrievers = {name: _retriever_params(cfg, exp.file_of("retrievers", name)) for name, cfg in exp.retrievers.items()}
    return Bound(benchmarks, agents, judges, retrievers)


def agent_spec(cfg: AgentConfig, where: str) -> AgentSpec:
    """The agent's params validated, and what it uses with them (built once, to ask it)."""
    cls = lookup(agent_class, cfg.kind, where, "kind")
    agent = cls(validate_params(cls.Params, cfg.params, where))
    try:
        needs = capabilities(agent.requires(), f"{where}: agent kind {cfg.kind!r}")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return AgentSpec(cfg.name, cfg.kind, agent.params, needs, agent.search_spec(), dict(agent.role_models()),
                     agent.prompt_version)


def _check_fit(exp: ResolvedExperiment, spec: AgentSpec, entry: BenchmarkEntry) -> None:
    supported = agent_class(spec.kind).benchmarks
    if supported is not None and entry.name not in supported:
        raise ConfigError(f"{exp.path}: agent {spec.name!r} ({spec.kind}) does not support benchmark "
                          f"{entry.name!r} (it runs {list(supported)})")
    if supported is None and benchmark_class(entry.name).request_format is None:
        raise ConfigError(f"{exp.path}: agent {spec.name!r} ({spec.kind}) needs a benchmark request format, which "
                          f"{entry.name!r} does not have")


def _retriever_params(cfg: RetrieverConfig, where: str) -> Params:
    cls = lookup(retriever_class, cfg.kind, where, "kind")
    params = validate_params(cls.Params, cfg.params, where)
    cls(params, cfg.chunking)  # a kind may refuse a combination its params model cannot express
    return params


class _JudgeSpecs:
    """Judge bindings, each (judge, benchmark) resolved once."""

    def __init__(self, exp: ResolvedExperiment):
        self.exp = exp
        self.memo: dict[tuple[str, str], JudgeSpec | None] = {}

    def spec(self, name: str, bench: str) -> JudgeSpec | None:
        if (name, bench) not in self.memo:
            self.memo[(name, bench)] = _spec(self.exp, name, bench)
        return self.memo[(name, bench)]

    def of_entry(self, index: int) -> list[JudgeSpec]:
        """The judges of benchmark entry `index`: its configured ones that fit it, then the benchmark's rule
        judges for the kinds no configured judge covers."""
        exp = self.exp
        entry = exp.experiment.benchmarks[index]
        bench_cls = benchmark_class(entry.name)
        names = entry.judges if entry.judges is not None else exp.experiment.judges
        specs = []
        for name in names:
            spec = self.spec(name, entry.name)
            if spec is None and entry.judges is not None:
                raise ConfigError(f"{exp.path}: key 'benchmarks.{index}.judges': judge {name!r} does not judge "
                                  f"benchmark {entry.name!r}")
            if spec is not None:
                specs.append(spec)
        covered = {k for s in specs for k in s.kinds}
        specs += [_rule_spec(k) for k in bench_cls.rule_judges if k not in covered]
        if bench_cls.llm_judges and not covered & set(bench_cls.llm_judges):
            raise ConfigError(f"{exp.path}: benchmark {entry.name!r} needs an LLM judge for "
                              f"{list(bench_cls.llm_judges)}: list a judge under `judges:`")
        return specs


def _rule_spec(kind: str) -> JudgeSpec:
    return JudgeSpec(kind, (kind,), {kind: validate_params(judge_class(kind).Params, {}, kind)})


def _other_kind(kind: str, bench: str) -> bool:
    """Whether `kind` is a registered judge kind of a benchmark other than `bench`."""
    try:
        return judge_class(kind).benchmark != bench
    except ConfigError:
        return False


def _spec(exp: ResolvedExperiment, name: str, bench: str) -> JudgeSpec | None:
    """The binding of judge `name` on benchmark `bench`, or None when it judges another benchmark."""
    if name not in exp.judges:
        return None
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
        cls = lookup(judge_class, cfg.kind, where, "kind")
        if cls.benchmark != bench:
            return None
        raw = {cfg.kind: cfg.params}
    params = {k: validate_params(judge_class(k).Params, p, where, prefix="params" if cfg.kind else f"params.{k}")
              for k, p in raw.items()}
    uses_llm = any(judge_class(k).uses_llm for k in raw)
    if uses_llm and not cfg.model:
        raise ConfigError(f"{where}: key 'model': judge kind(s) {list(raw)} need a model")
    model = exp.models[cfg.model] if cfg.model else None
    calibrated = cfg.threshold == CALIBRATED
    spec = JudgeSpec(name, tuple(raw), params, model, cfg.sampling if model else None, cfg.repeats, uses_llm,
                     0.5 if calibrated else cfg.threshold, cfg.reasons, calibrated)
    if calibrated:
        _check_calibrated(exp, spec, bench)
    return spec


def _check_calibrated(exp: ResolvedExperiment, spec: JudgeSpec, bench: str) -> None:
    """`threshold: calibrated` needs probes to choose it on, and at least two probe instances so that the pass
    rates reported beside it are cross-fitted (each instance judged at a threshold fitted on the others)."""
    override = exp.experiment.overrides.judges.get(spec.name)
    where, key = (exp.path, f"overrides.judges.{spec.name}.threshold") if override and override.threshold \
        else (exp.file_of("judges", spec.name), "threshold")
    if exp.experiment.judge_probes < 2:
        why = f"the experiment {exp.path} sets judge_probes: {exp.experiment.judge_probes}, and 2 or more are needed"
    elif not spec.probed_on(bench):
        why = f"judge {spec.name!r} has no probe items on benchmark {bench!r} (its kinds: {', '.join(spec.kinds)})"
    else:
        return
    raise ConfigError(f"{where}: key '{key}': `calibrated` chooses the threshold on the probe set, but {why}; "
                      f"allowed: {THRESHOLDS}")


def judge_specs(exp: ResolvedExperiment, index: int) -> list[JudgeSpec]:
    """The judge bindings of benchmark entry `index`."""
    return bound(exp).judges[index]


# --- checking the input folders an experiment names -----------------------------------------------------

def source_problems(exp: ResolvedExperiment, skip: Collection[int] = ()) -> list[str]:
    """One line per problem of every benchmark entry's `source:` (file, row, field, what was expected),
    found by the benchmarks' own readers before any server starts; empty when every source reads. `skip`: the
    entries (by position) not to read, their data being built already."""
    problems = []
    for i, entry in enumerate(exp.experiment.benchmarks):
        if entry.source and i not in skip:
            problems += benchmark_class(entry.name).validate_source(Path(entry.source), bound(exp).benchmarks[i])
    return problems
