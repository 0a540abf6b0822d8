"""Pydantic models of an experiment file and of the YAML files it names.

An experiment references every model, deployment, retriever, judge and agent
by name; each lives in its own file under `configs/<kind>/<name>.yaml`:

  models/       which weights: source, revision, digest, dtype, quantization, default sampling
  deployments/  how weights are served: vllm / embedded / openai, parallelism, context, endpoint
  retrievers/   a registered retriever kind, its chunking and params
  judges/       a registered judge kind (or the benchmark's own LLM judges) bound to a model
  agents/       a registered agent kind and its params

`load_experiment` resolves them all and validates every component's `params`
against the component's own model, failing early with the file and the key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perseval.errors import ConfigError
from perseval.hashing import content_key
from perseval.params import error_lines, invalid


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Sampling(Strict):
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = Field(256, ge=1)
    seed: int | None = None  # None: the experiment seed


class Price(Strict):
    """What using a model costs, in US dollars: for cost reports only. No key includes it, so adding or
    changing a price invalidates no output and no cached request."""

    input_per_mtok: float = Field(0.0, ge=0)  # per million prompt tokens (an API's list price)
    output_per_mtok: float = Field(0.0, ge=0)  # per million completion tokens
    # per hour of one GPU while a stage unit runs on it (times a vLLM deployment's tensor_parallel_size;
    # an embedded server counts as one device): what a rented GPU costs
    per_gpu_hour: float = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _some_price(self) -> "Price":
        if not self.model_fields_set:
            raise ValueError("give at least one of input_per_mtok, output_per_mtok, per_gpu_hour")
        return self


class ModelConfig(Strict):
    """Which weights: everything that fixes a model's answers, nothing about how it is served."""

    name: str
    format: Literal["gguf", "hf", "api"]
    # gguf: a file path or package:<module>/<file>; hf: a hub id or a local folder; api: the served name
    source: str
    revision: str | None = None  # hub commit (hf) or the provider's model version (api)
    digest: str | None = None  # sha256 of the weights, pinned: a file that differs is refused
    dtype: str = "auto"
    quantization: str | None = None  # e.g. Q4_1 (gguf), awq / fp8 (vllm)
    deployment: str  # default deployment (configs/deployments/<name>.yaml); an experiment may override it
    sampling: Sampling = Sampling()
    price: Price | None = None  # reporting only (perseval.cost); never part of a key


class VLLMSettings(Strict):
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    extra_args: list[str] = []
    python: str | None = None  # interpreter to launch with (python -m vllm...); None: the `vllm` command
    env: dict[str, str] = {}


DEPLOYMENT_FORMATS = {"embedded": "gguf", "vllm": "hf", "openai": "api"}


class DeploymentConfig(Strict):
    """How a model is served: a server perseval starts (vllm, embedded) or an existing endpoint (openai)."""

    name: str
    kind: Literal["embedded", "vllm", "openai"]
    context_length: int = Field(4096, ge=256)  # n_ctx (embedded) / --max-model-len (vllm)
    n_threads: int | None = None  # embedded: llama.cpp threads (None: all cores)
    vllm: VLLMSettings = VLLMSettings()
    base_url: str | None = None  # openai: the endpoint (…/v1)
    api_key_env: str | None = None  # openai: the variable holding the key (never logged)
    max_concurrency: int = Field(4, ge=1)
    timeout_s: float = 300.0
    retries: int = Field(3, ge=0)
    startup_timeout_s: float = 600.0

    @model_validator(mode="after")
    def _kind_fields(self) -> "DeploymentConfig":
        if self.kind == "openai" and not self.base_url:
            raise ValueError("an openai deployment needs `base_url`")
        return self


class ChunkingConfig(Strict):
    size: int = Field(256, gt=0)  # tokens of the retriever's tokenizer (words for sparse retrievers)
    overlap: int = Field(50, ge=0)

    @model_validator(mode="after")
    def _overlap(self) -> "ChunkingConfig":
        if self.overlap >= self.size:
            raise ValueError("chunking.overlap must be smaller than chunking.size")
        return self


class RetrieverConfig(Strict):
    """A registered retriever kind (dense, bm25, ...): how histories are chunked, indexed and searched."""

    name: str
    kind: str = "dense"
    chunking: ChunkingConfig = ChunkingConfig()
    params: dict[str, Any] = {}


class JudgeConfig(Strict):
    """A judge kind bound to the judge role. With no `kind`, `model` is bound to every LLM judge kind the
    benchmark declares for its items (IBA checkpoints; Bespoke claims and criteria); `params` is then
    keyed by kind. A rule judge (no model) needs no YAML: benchmarks apply theirs by default."""

    name: str
    kind: str | None = None
    model: str | None = None
    sampling: Sampling = Sampling(max_tokens=128)
    repeats: int = Field(1, ge=1)
    params: dict[str, Any] = {}


class AgentConfig(Strict):
    name: str
    kind: str  # registry kind, e.g. rag, iba.agent
    params: dict[str, Any] = {}


class BenchmarkEntry(Strict):
    name: str  # registry name: iba, bespoke, apeb
    sample: int = Field(8, ge=1)
    seed: int | None = None
    source: str | None = None  # a local release folder to ingest; None: construct / bundled sample
    params: dict[str, Any] = {}
    agents: list[str]
    judges: list[str] | None = None  # None: the experiment's `judges`


class DaskSettings(Strict):
    address: str | None = None  # an existing scheduler; None: a LocalCluster
    n_workers: int = 2
    threads_per_worker: int = 1


# Which instances become MLflow traces (perseval.traces): all, those that went wrong, or the first N of each
# cell; None: all when the run holds fewer than 1000 agent outputs, else the first 100 of each cell.
TraceSelection = Literal["all", "failed"] | Annotated[int, Field(ge=0)] | None


class MLflowSettings(Strict):
    experiment: str = "perseval"
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_root: str = "mlruns/artifacts"
    traces: TraceSelection = None


class ExperimentConfig(Strict):
    name: str
    seed: int = 42
    repeats: int = Field(1, ge=1)
    shard_size: int = Field(8, ge=1)
    output_root: str = "runs"
    request_cache: str | None = None  # None: <output_root>/request-cache.sqlite
    plugins: list[str] = []  # modules or .py files (relative to this file) that register components
    backbones: list[str]
    deployments: dict[str, str] = {}  # model name -> deployment name, overriding the model's default
    retrievers: list[str]
    judges: list[str] = []
    benchmarks: list[BenchmarkEntry]
    dask: DaskSettings = DaskSettings()
    mlflow: MLflowSettings = MLflowSettings()


class ResolvedExperiment(Strict):
    """The experiment with every referenced config loaded: what the flow runs and MLflow records."""

    path: str
    experiment: ExperimentConfig
    models: dict[str, ModelConfig]
    deployments: dict[str, DeploymentConfig]  # model name -> the deployment that serves it in this run
    retrievers: dict[str, RetrieverConfig]
    judges: dict[str, JudgeConfig]
    agents: dict[str, AgentConfig]
    plugins: tuple[str, ...] = ()  # resolved: .py files made absolute
    files: dict[str, str] = {}  # "agents/<name>" -> the YAML it came from, for error messages

    def key(self) -> str:
        return content_key(self.model_dump(exclude={"path", "files"}))

    def file_of(self, kind: str, name: str) -> str:
        return self.files.get(f"{kind}/{name}", self.path)


# --- reading YAML ----------------------------------------------------------------------------------

class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key written twice in one mapping (YAML would keep the last silently)."""


def _mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ConfigError(f"line {key_node.start_mark.line + 1}: key {key!r} is written twice")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"{path}: file not found")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 (safe loader)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    except ConfigError as exc:
        raise ConfigError(f"{path}, {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def _validate(model: type[Strict], data: dict[str, Any], path: Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(invalid(str(path), model.__name__, error_lines(exc, "", model))) from None


def load_config(model: type[Strict], path: str | Path) -> Any:
    """Load and validate one YAML file as `model`."""
    path = Path(path)
    return _validate(model, read_yaml(path), path)


# The configs perseval ships (models, agents, judges, ...), for experiment files kept elsewhere.
SHIPPED_CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def config_root_for(experiment_path: Path) -> Path:
    """configs/experiments/x.yaml -> configs/ (the folder holding models/, retrievers/, ...)."""
    parent = experiment_path.resolve().parent
    return parent.parent if parent.name == "experiments" else parent


def config_roots(experiment_path: Path, config_root: str | Path | None = None) -> list[Path]:
    """Where named configs are looked up, first hit wins: the experiment's own root (a user's file of
    the same name overrides a shipped one), then perseval's shipped configs, so an experiment file
    written in the user's own folder can name `smollm2-135m` or `iba-agent` without copying them."""
    own = Path(config_root) if config_root else config_root_for(experiment_path)
    shipped = [SHIPPED_CONFIGS] if SHIPPED_CONFIGS.is_dir() and SHIPPED_CONFIGS != own.resolve() else []
    return [own, *shipped]


# --- resolving an experiment -----------------------------------------------------------------------

class _Resolver:
    """Loads each named config once, remembering which file it came from."""

    def __init__(self, roots: list[Path]):
        self.roots = roots
        self.files: dict[str, str] = {}

    def named(self, kind: str, model: type[Strict], name: str, referrer: Path | str, key: str) -> Any:
        tried = [root / kind / f"{name}.yaml" for root in self.roots]
        path = next((p for p in tried if p.exists()), None)
        if path is None:
            known = sorted({p.stem for root in self.roots for p in (root / kind).glob("*.yaml")})
            missing = " or ".join(str(p) for p in tried)
            raise ConfigError(f"{referrer}: key '{key}' names {name!r}, but there is no {missing} (known: {known})")
        cfg = load_config(model, path)
        if cfg.name != name:
            raise ConfigError(f"{path}: key 'name' is {cfg.name!r} but the file is named {name!r}")
        self.files[f"{kind}/{name}"] = str(path)
        return cfg


def load_experiment(path: str | Path, config_root: str | Path | None = None) -> ResolvedExperiment:
    """Load an experiment file, every config it references by name, and validate every component's params."""
    from perseval import components  # the registry and the component classes; imported late (no cycle)

    path = Path(path)
    exp: ExperimentConfig = load_config(ExperimentConfig, path)
    res = _Resolver(config_roots(path, config_root))
    plugins = components.load_experiment_plugins(exp.plugins, path)
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
    for i, bench in enumerate(exp.benchmarks):
        if bench.source and not Path(bench.source).exists():
            raise ConfigError(f"{path}: key 'benchmarks.{i}.source': {bench.source!r} does not exist (a relative "
                              "path is read from the folder perseval runs in)")
        for name in bench.agents:
            agents[name] = res.named("agents", AgentConfig, name, path, f"benchmarks.{i}.agents")
        for role, name in components.construction_models(bench, exp.backbones, str(path), i).items():
            need_model(name, path, f"benchmarks.{i}.params.construction.{role}_model")
    deployments = {m: _deployment(res, exp, path, cfg) for m, cfg in models.items()}
    resolved = ResolvedExperiment(path=str(path), experiment=exp, models=models, deployments=deployments,
                                  retrievers=retrievers, judges=judges, agents=agents, plugins=plugins,
                                  files=res.files)
    components.validate_experiment(resolved)
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


__all__ = ["AgentConfig", "BenchmarkEntry", "ChunkingConfig", "DaskSettings", "DeploymentConfig", "ExperimentConfig",
           "JudgeConfig", "MLflowSettings", "ModelConfig", "Price", "ResolvedExperiment", "RetrieverConfig", "Sampling",
           "Strict", "VLLMSettings", "load_config", "load_experiment", "read_yaml"]
