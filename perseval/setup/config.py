"""Pydantic models of an experiment file and of the YAML files it names.

An experiment references every model, deployment, retriever, judge and agent
by name; each lives in its own file under `configs/<kind>/<name>.yaml`:

  models/       which weights: source, revision, digest, dtype, quantization, default sampling
  deployments/  how weights are served: vllm / embedded / openai, parallelism, context, endpoint
  retrievers/   a registered retriever kind, its chunking and params
  judges/       a registered judge kind (or the benchmark's own LLM judges) bound to a model
  agents/       a registered agent kind and its params

This module holds the schemas and reads YAML only; perseval.setup.experiment resolves
an experiment file (every name it references, plugins, every component's
params, judge bindings) once, failing early with the file and the key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from perseval.core.errors import ConfigError
from perseval.core.hashing import content_key
from perseval.setup.overrides import Overrides
from perseval.setup.params import NoBooleanNumbers, error_lines, invalid


class Strict(NoBooleanNumbers):
    """Unknown keys are errors; a YAML boolean where a number is expected too (`seed: yes`)."""

    model_config = ConfigDict(extra="forbid")


class Sampling(Strict):
    temperature: float = Field(0.0, ge=0)  # a negative one is refused by every server, request by request
    top_p: float = Field(1.0, gt=0, le=1)
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
    price: Price | None = None  # reporting only (perseval.pipeline.cost); never part of a key


class VLLMSettings(Strict):
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    extra_args: list[str] = []
    python: str | None = None  # interpreter to launch with (python -m vllm...); None: the `vllm` command
    env: dict[str, str] = {}


DEPLOYMENT_FORMATS = {"embedded": "gguf", "vllm": "hf", "openai": "api"}
# How a server wants a JSON schema in `response_format`: json_schema (vLLM, OpenAI), json_object with a
# `schema` beside it (llama.cpp's servers), as a llama.cpp grammar made from it (`grammar`: what the embedded
# llama-server gets, perseval.llm.client.gbnf), or none (no response_format: the answer is only parsed).
STRUCTURED_OUTPUT = ("json_schema", "json_object_schema", "gbnf", "none")
StructuredOutput = Literal["json_schema", "json_object_schema", "gbnf", "none"]
EmbeddedServer = Literal["llama-server", "llama-cpp-python"]
EMBEDDED_ONLY = ("server", "parallel", "n_threads")


def default_dialect(kind: str) -> str:
    """The structured-output dialect of a deployment kind that sets none: what llama.cpp / vLLM accept."""
    return "json_object_schema" if kind == "embedded" else "json_schema"


class DeploymentConfig(Strict):
    """How a model is served: a server perseval starts (vllm, embedded) or an existing endpoint (openai)."""

    name: str
    kind: Literal["embedded", "vllm", "openai"]
    context_length: int = Field(4096, ge=256)  # n_ctx (embedded) / --max-model-len (vllm)
    n_threads: int | None = Field(None, ge=1)  # embedded: llama.cpp threads (None: all cores)
    # embedded: which server runs the GGUF (perseval.llm.embedded): llama.cpp's llama-server, several
    # requests decoded together, or llama-cpp-python's, one at a time
    server: EmbeddedServer = "llama-server"
    parallel: int | None = Field(None, ge=1)  # embedded llama-server: slots (None: perseval.llm.embedded's default, 1)
    vllm: VLLMSettings = VLLMSettings()
    base_url: str | None = None  # openai: the endpoint (…/v1)
    api_key_env: str | None = None  # openai: the variable holding the key (never logged)
    # requests in flight per client; None: sized to the server (embedded: its slots + 1), else 4
    max_concurrency: int | None = Field(None, ge=1)
    timeout_s: float = Field(300.0, gt=0)
    retries: int = Field(3, ge=0)
    startup_timeout_s: float = Field(600.0, gt=0)
    # the dialect of structured output; None: by server (llama-server gbnf, llama-cpp-python json_object_schema,
    # else json_schema). A serving choice like the port: it enters no key, so switching it reuses cached answers.
    structured_output: StructuredOutput | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, url: str | None) -> str | None:
        """An http(s) URL with a host and a port in 1..65535 (a bad one would fail every request alike)."""
        if url is None:
            return url
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1 or port == 0:
            raise ValueError(f"{url!r} is not an http:// or https:// URL with a host and a port in 1..65535 "
                             "(e.g. http://127.0.0.1:8000/v1)")
        return url

    @model_validator(mode="after")
    def _kind_fields(self) -> "DeploymentConfig":
        if self.kind == "openai" and not self.base_url:
            raise ValueError("an openai deployment needs `base_url`")
        misplaced = sorted(k for k in EMBEDDED_ONLY if k in self.model_fields_set) if self.kind != "embedded" else []
        if misplaced:  # a setting no server of this kind reads would be ignored without a word
            raise ValueError(f"{', '.join(misplaced)}: only an embedded deployment reads "
                             f"{'them' if len(misplaced) > 1 else 'it'} (this one is kind {self.kind})")
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
    # a binary verdict read as a probability passes at P(true) >= threshold (perseval.judges.binary)
    threshold: float = Field(0.5, gt=0.0, lt=1.0)


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
    baseline: str | None = None  # one of `agents`: the headline shows every cell's paired difference to it

    @field_validator("baseline")
    @classmethod
    def _baseline_is_an_agent(cls, value: str | None, info: ValidationInfo) -> str | None:
        agents = info.data.get("agents")
        if value is not None and agents is not None and value not in agents:
            raise ValueError(f"{value!r} is not one of this entry's agents (allowed: {', '.join(agents)})")
        return value
    controls: list[Literal["swapped-history"]] | None = None  # None: the experiment's `controls` (perseval.pipeline.controls)


class DaskSettings(Strict):
    address: str | None = None  # an existing scheduler; None: a LocalCluster
    n_workers: int = Field(2, ge=1)  # 0 or less: a LocalCluster with no worker, and a run that waits forever
    threads_per_worker: int = Field(1, ge=1)
    # True: no Dask; the tasks run on n_workers x threads_per_worker threads of the perseval process (Prefect's
    # ThreadPoolTaskRunner). On one small machine where the model server does the work, worker processes,
    # their nannies and heartbeats buy nothing but CPU taken from it. An execution choice: it enters no key.
    in_process: bool = False


# Which instances become MLflow traces (perseval.report.traces): all, those that went wrong, or the first N of each
# cell; None: all when the run holds fewer than 1000 agent outputs, else the first 100 of each cell.
TraceSelection = Literal["all", "failed"] | Annotated[int, Field(ge=0)] | None


class MLflowSettings(Strict):
    experiment: str = "perseval"
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_root: str = "mlruns/artifacts"
    traces: TraceSelection = None


class StatisticsSettings(Strict):
    """How every interval is computed (perseval.metrics.uncertainty): users are resampled `resamples` times
    with `seed`, and intervals are at `level`. Point estimates never depend on these."""

    level: float = Field(0.95, gt=0, lt=1)
    resamples: int = Field(2000, ge=100)
    seed: int = 0


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
    overrides: Overrides = Overrides()  # this experiment's agent / judge / model settings (perseval.setup.overrides)
    # extra runs that say what a score means (perseval.pipeline.controls): swapped-history = another user's history
    controls: list[Literal["swapped-history"]] = []
    # answers of known verdict each LLM judge also judges, for this many instances per benchmark (perseval.report.probes)
    judge_probes: int = Field(0, ge=0)
    dask: DaskSettings = DaskSettings()
    mlflow: MLflowSettings = MLflowSettings()
    statistics: StatisticsSettings = StatisticsSettings()


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
    # perseval.setup.experiment.Bound: every component's params validated once, set by load_experiment; not part
    # of the record (nor of its key): it is derived from the fields above
    _bound: Any = PrivateAttr(None)

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


__all__ = ["AgentConfig", "BenchmarkEntry", "ChunkingConfig", "DaskSettings", "DeploymentConfig", "ExperimentConfig",
           "JudgeConfig", "MLflowSettings", "ModelConfig", "Price", "ResolvedExperiment", "RetrieverConfig", "Sampling",
           "StatisticsSettings", "Strict", "VLLMSettings", "load_config", "read_yaml"]
