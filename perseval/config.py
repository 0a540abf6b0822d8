"""Pydantic models of an experiment file and of the model/retriever/judge/agent YAML it names.

An experiment references every model, retriever, judge and agent by name; each
lives in its own file under `configs/<kind>/<name>.yaml`. `load_experiment`
resolves them all and fails early, naming the file and the key, on a bad file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perseval.errors import ConfigError
from perseval.hashing import content_key


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Sampling(Strict):
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int | None = None  # None: the experiment seed


class VLLMSettings(Strict):
    tensor_parallel_size: int = 1
    max_model_len: int = 8192
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    dtype: str = "auto"
    extra_args: list[str] = []
    python: str | None = None  # interpreter to launch with; None: the `vllm` command
    env: dict[str, str] = {}


class ModelConfig(Strict):
    """A model and the deployment that serves it."""

    name: str
    kind: Literal["embedded", "vllm", "openai"]
    model: str  # HF id or local folder (vllm), served name (openai), label (embedded)
    revision: str | None = None
    gguf: str | None = None  # embedded: GGUF path, or package:<module>/<file>
    n_ctx: int = 4096
    n_threads: int | None = None
    base_url: str | None = None  # openai: an existing endpoint
    api_key_env: str | None = None  # openai: the variable holding the key (never logged)
    vllm: VLLMSettings = VLLMSettings()
    sampling: Sampling = Sampling()
    max_concurrency: int = 4
    timeout_s: float = 300.0
    retries: int = 3
    startup_timeout_s: float = 600.0

    @model_validator(mode="after")
    def _kind_fields(self) -> "ModelConfig":
        if self.kind == "embedded" and not self.gguf:
            raise ValueError("an embedded deployment needs `gguf` (a path or package:<module>/<file>)")
        if self.kind == "openai" and not self.base_url:
            raise ValueError("an openai deployment needs `base_url`")
        return self


class EmbedderConfig(Strict):
    kind: Literal["flag", "m3"] = "flag"  # FlagModel or BGEM3FlagModel
    model: str  # path, HF id, or package:<module>
    pooling: Literal["cls", "mean"] = "cls"
    normalize: bool = True
    query_instruction: str = ""
    batch_size: int = 64
    max_length: int = 512
    fp16: bool = False
    device: str | None = None  # None: FlagEmbedding picks (cuda when present)


class ChunkingConfig(Strict):
    size: int = Field(256, gt=0)  # tokens of the embedder's tokenizer
    overlap: int = Field(50, ge=0)

    @model_validator(mode="after")
    def _overlap(self) -> "ChunkingConfig":
        if self.overlap >= self.size:
            raise ValueError("chunking.overlap must be smaller than chunking.size")
        return self


class IndexConfig(Strict):
    type: Literal["flat_ip", "hnsw"] = "flat_ip"
    device: Literal["cpu", "gpu", "auto"] = "cpu"


class RetrieverConfig(Strict):
    name: str
    embedder: EmbedderConfig
    chunking: ChunkingConfig = ChunkingConfig()
    index: IndexConfig = IndexConfig()
    top_k: int = 3


class JudgeConfig(Strict):
    """A judge is just a model bound to the judge role, with its own sampling and repeats."""

    name: str
    model: str
    sampling: Sampling = Sampling(max_tokens=128)
    repeats: int = Field(1, ge=1)


class AgentConfig(Strict):
    name: str
    kind: str  # registry kind, e.g. iba.rag
    params: dict[str, Any] = {}


class BenchmarkEntry(Strict):
    name: str  # registry name: iba, bespoke, apeb
    sample: int = Field(8, ge=1)
    seed: int | None = None
    source: str | None = None  # a local release folder to ingest; None: construct / bundled sample
    params: dict[str, Any] = {}
    agents: list[str]


class DaskSettings(Strict):
    address: str | None = None  # an existing scheduler; None: a LocalCluster
    n_workers: int = 2
    threads_per_worker: int = 1


class MLflowSettings(Strict):
    experiment: str = "perseval"
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_root: str = "mlruns/artifacts"


class ExperimentConfig(Strict):
    name: str
    seed: int = 42
    repeats: int = Field(1, ge=1)
    shard_size: int = Field(8, ge=1)
    output_root: str = "runs"
    request_cache: str | None = None  # None: <output_root>/request-cache.sqlite
    backbones: list[str]
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
    retrievers: dict[str, RetrieverConfig]
    judges: dict[str, JudgeConfig]
    agents: dict[str, AgentConfig]

    def key(self) -> str:
        return content_key(self.model_dump(exclude={"path"}))


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"{path}: file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def _validate(model: type[Strict], data: dict[str, Any], path: Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(top level)"
            lines.append(f"  key '{key}': {err['msg']}")
        raise ConfigError(f"{path}: invalid {model.__name__}\n" + "\n".join(lines)) from None


def load_config(model: type[Strict], path: str | Path) -> Any:
    """Load and validate one YAML file as `model`."""
    path = Path(path)
    return _validate(model, _read_yaml(path), path)


def config_root_for(experiment_path: Path) -> Path:
    """configs/experiments/x.yaml -> configs/ (the folder holding models/, retrievers/, ...)."""
    parent = experiment_path.resolve().parent
    return parent.parent if parent.name == "experiments" else parent


def _named(kind_dir: Path, model: type[Strict], name: str, referrer: Path, key: str) -> Any:
    path = kind_dir / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in kind_dir.glob("*.yaml"))
        raise ConfigError(f"{referrer}: key '{key}' names {name!r}, but {path} does not exist (known: {known})")
    cfg = load_config(model, path)
    if cfg.name != name:
        raise ConfigError(f"{path}: key 'name' is {cfg.name!r} but the file is named {name!r}")
    return cfg


def load_experiment(path: str | Path, config_root: str | Path | None = None) -> ResolvedExperiment:
    """Load an experiment file and every config it references by name."""
    path = Path(path)
    exp: ExperimentConfig = load_config(ExperimentConfig, path)
    root = Path(config_root) if config_root else config_root_for(path)
    models = {n: _named(root / "models", ModelConfig, n, path, "backbones") for n in exp.backbones}
    retrievers = {n: _named(root / "retrievers", RetrieverConfig, n, path, "retrievers") for n in exp.retrievers}
    judges = {n: _named(root / "judges", JudgeConfig, n, path, "judges") for n in exp.judges}
    for j in judges.values():
        if j.model not in models:
            models[j.model] = _named(root / "models", ModelConfig, j.model, root / "judges" / f"{j.name}.yaml", "model")
    agents: dict[str, AgentConfig] = {}
    for i, bench in enumerate(exp.benchmarks):
        for name in bench.agents:
            agents[name] = _named(root / "agents", AgentConfig, name, path, f"benchmarks.{i}.agents")
    return ResolvedExperiment(path=str(path), experiment=exp, models=models, retrievers=retrievers,
                              judges=judges, agents=agents)
