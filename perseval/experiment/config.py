"""Pydantic models of an experiment file and of the YAML files it names.

An experiment references every model, deployment, retriever, judge and agent
by name; each lives in its own file under `configs/<kind>/<name>.yaml`:

  models/       which weights: source, revision, digest, dtype, quantization, default sampling
  deployments/  how weights are served: vllm / embedded / openai, parallelism, context, endpoint
  retrievers/   a registered retriever kind, its chunking and params
  judges/       a registered judge kind (or the benchmark's own LLM judges) bound to a model
  agents/       a registered agent kind and its params

This module holds the schemas and reads YAML only; perseval.experiment.load resolves
an experiment file (every name it references, plugins, every component's
params, judge bindings) once, failing early with the file and the key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from perseval.core import files
from perseval.core.errors import ConfigError, InputError
from perseval.core.hashing import content_key
from perseval.experiment.overrides import Overrides, Threshold
from perseval.kernel.params import Strict, error_lines, invalid
from perseval.llm.settings import DeploymentConfig, ModelConfig, Price, Sampling, VLLMSettings
from perseval.metrics.settings import StatisticsSettings
from perseval.retrieval.settings import ChunkingConfig, RetrieverConfig


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
    # a binary verdict read as a probability passes at P(true) >= threshold (perseval.judges.binary); `calibrated`:
    # the threshold is chosen on the probe set, per benchmark entry (perseval.report.probes)
    threshold: Threshold = 0.5
    # false: a binary verdict is asked without its one-sentence reason (the verdict alone, a few tokens instead of
    # ~25: the CPU protocol's budget). The prompt is the same, so the verdict and P(true) are too; the tables lose
    # only the reason beside each judgment
    reasons: bool = True


class AgentConfig(Strict):
    name: str
    kind: str  # registry kind, e.g. rag, iba.agent
    params: dict[str, Any] = {}


class BenchmarkEntry(Strict):
    name: str  # registry name: iba, bespoke, apeb
    # tells two entries of one benchmark apart in every cell name, table and key (perseval.experiment.entries)
    label: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=40)
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
    statistics: StatisticsSettings | None = None  # the fields it sets override the experiment's `statistics`


class DaskSettings(Strict):
    address: str | None = None  # an existing scheduler; None: a LocalCluster
    n_workers: int = Field(2, ge=1)  # 0 or less: a LocalCluster with no worker, and a run that waits forever
    threads_per_worker: int = Field(1, ge=1)
    # True: no Dask; the tasks run on n_workers x threads_per_worker threads of the perseval process (Prefect's
    # ThreadPoolTaskRunner). On one small machine where the model server does the work, worker processes,
    # their nannies and heartbeats buy nothing but CPU taken from it. False: a LocalCluster of n_workers
    # processes. None (unset): threads where the machine has no core for each worker besides this process and
    # a model server (perseval_flows.runtime). An execution choice: it enters no key.
    in_process: bool | None = None


# Which instances become MLflow traces (perseval.report.traces): all, those that went wrong, or the first N of each
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
    # instances per run/judge task; None: sized to the deployments' concurrency and the data (perseval.pipeline.units)
    shard_size: int | None = Field(None, ge=1)
    output_root: str = "runs"
    request_cache: str | None = None  # None: <output_root>/request-cache.sqlite
    plugins: list[str] = []  # modules or .py files (relative to this file) that register components
    backbones: list[str]
    deployments: dict[str, str] = {}  # model name -> deployment name, overriding the model's default
    retrievers: list[str]
    judges: list[str] = []
    benchmarks: list[BenchmarkEntry]
    overrides: Overrides = Overrides()  # this experiment's agent / judge / model settings (perseval.experiment.overrides)
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
    # perseval.experiment.load.Bound: every component's params validated once, set by load_experiment; not part
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
    try:  # a folder, a link loop, an unreadable file or a bad byte (with its line) named as such
        text = files.read_text(path, missing="file not found")
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (safe loader)
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
