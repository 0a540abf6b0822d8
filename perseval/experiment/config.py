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

from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, field_validator

from perseval.core import files
from perseval.core.errors import ConfigError
from perseval.core.hashing import content_key
from perseval.core.yaml_text import read_yaml_file
from perseval.experiment.overrides import Overrides, Threshold
from perseval.kernel.params import Strict, error_lines, invalid
from perseval.llm.settings import DeploymentConfig, ModelConfig, Sampling
from perseval.metrics.settings import StatisticsSettings
from perseval.retrieval.settings import RetrieverConfig


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
    # the threshold is chosen on the probe set, per benchmark entry (perseval.pipeline.probes)
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


# Which instances become MLflow traces (perseval.report.sink.traces): all, those that went wrong, or the first N of each
# cell; None: all when the run holds fewer than 1000 agent outputs, else the first 100 of each cell.
TraceSelection = Literal["all", "failed"] | Annotated[int, Field(ge=0)] | None


class MLflowSettings(Strict):
    experiment: str = "perseval"
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_root: str = "mlruns/artifacts"
    traces: TraceSelection = None


DEFAULT_CACHE = "request-cache.sqlite"  # under output_root when `request_cache` is not set


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
    # answers of known verdict each LLM judge also judges, for this many instances per benchmark (perseval.pipeline.probes)
    judge_probes: int = Field(0, ge=0)
    dask: DaskSettings = DaskSettings()
    mlflow: MLflowSettings = MLflowSettings()
    statistics: StatisticsSettings = StatisticsSettings()

    def request_cache_path(self, output_root: str | None = None) -> Path:
        """The request cache's file: `request_cache`, or DEFAULT_CACHE under the output root (`output_root`, the
        command line's, in place of the file's)."""
        return Path(self.request_cache) if self.request_cache else Path(output_root or self.output_root) / DEFAULT_CACHE


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

def read_yaml(path: Path) -> dict[str, Any]:
    """A config file's mapping (perseval.core.yaml_text reads it: a key twice, an alias bomb, a bad byte or
    text that is no YAML named with the file and line)."""
    data = read_yaml_file(path)
    if not isinstance(data, dict):
        found = "nothing (the file is empty)" if data is None else files.kind(data)
        raise ConfigError(f"{path}: expected a mapping (key: value lines) at the top level, got {found}")
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
