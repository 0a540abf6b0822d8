"""The typed units of a plan: what each stage computes, with its content key and validated components.

Units are made by perseval.pipeline.plan and handed to the stages (perseval.pipeline.stages) and to Prefect tasks; they
carry validated params and specs (perseval.experiment.specs), so a stage builds its components with no second
validation, and one model object per unit (its name is the model's).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from perseval.llm.settings import ModelConfig
from perseval.metrics.settings import StatisticsSettings
from perseval.retrieval.settings import RetrieverConfig
from perseval.experiment.config import BenchmarkEntry, ResolvedExperiment
from perseval.pipeline.controls import Control, control_label
from perseval.kernel.params import Params
from perseval.experiment.specs import AgentSpec, JudgeSpec


MIN_SHARD = 8  # the smallest automatic shard (the fixed default before shards followed the deployment)
SHARDS_PER_SLOT = 4  # automatic shards per task slot and unit: few tasks, and a short tail of one slot working


@dataclass(frozen=True)
class Sharding:
    """How many instances one run or judge task takes: the experiment's `shard_size`, or (None) a size that
    follows the deployments and the data. Each task's client keeps up to its deployment's `max_concurrency`
    requests in flight, so an automatic shard holds at least that many instances; and it holds at least
    1/(slots x SHARDS_PER_SLOT) of the data, so that a stage is a few tasks per slot whatever its size: a task
    costs about 0.1-0.3 s of its own (Prefect's task run, the shard's reads; docs/guides/performance.md), which
    at the old fixed 8 instances was most of a task against a fast server."""

    explicit: int | None = None
    concurrency: int = 1  # the largest max_concurrency among the experiment's deployments
    slots: int = 1  # tasks the task runner runs at once

    def size(self, n_instances: int) -> int:
        if self.explicit is not None:
            return self.explicit
        spread = -(-n_instances // (self.slots * SHARDS_PER_SLOT))
        return max(MIN_SHARD, self.concurrency, spread)


def shards(n_instances: int, shard_size: "int | Sharding") -> list[int]:
    """The shard ids of a benchmark's instances: the one place the shard count is derived."""
    size = shard_size.size(n_instances) if isinstance(shard_size, Sharding) else shard_size
    return list(range(max(1, -(-n_instances // size))))


@dataclass
class DataUnit:
    """A benchmark entry's instances and histories (constructed, or ingested from `entry.source`)."""

    key: str
    entry: BenchmarkEntry
    seed: int  # the entry's seed, or the experiment's: the same one reaches its runs and judgings
    params: Params  # the entry's params, validated once
    construction: dict[str, ModelConfig] = field(default_factory=dict)  # role -> model (LLM-mode builds)
    name: str = ""  # what its cells are called: the benchmark's name, or with a label or digest (perseval.experiment.entries)

    def __post_init__(self) -> None:
        self.name = self.name or self.entry.name


@dataclass
class IndexUnit:
    """Every owner's history chunked and indexed by one retriever."""

    key: str
    data: DataUnit
    retriever: RetrieverConfig
    params: Params  # the retriever's params, validated once


@dataclass
class RunUnit:
    """One agent on one backbone over a benchmark's instances (mapped per shard)."""

    key: str
    data: DataUnit
    index: IndexUnit | None  # None: the agent uses neither retrieval nor search, so no retriever reaches it
    agent: AgentSpec
    model: ModelConfig | None  # the backbone; None: an agent that uses no model (oracles)
    repeats: int
    seed: int
    roles: dict[str, ModelConfig] = field(default_factory=dict)  # role models besides the backbone (a profiler)
    control: Control | None = None  # a control variant (perseval.pipeline.controls); None: the plain run

    @property
    def backbone(self) -> str | None:
        return self.model.name if self.model else None

    @property
    def label(self) -> str:
        return f"{self.data.name}/{self.agent.name}/{self.backbone or '-'}{control_label(self.control)}"


@dataclass
class JudgeUnit:
    """One judge binding over one run's outputs (mapped per shard)."""

    key: str
    run: RunUnit
    judge: JudgeSpec
    seed: int

    @property
    def model(self) -> ModelConfig | None:
        """The judge model (None for rule judges)."""
        return self.judge.model


@dataclass
class Cell:
    """benchmark x agent x backbone x retriever x judge: one score table, one MLflow child run."""

    key: str  # the score key
    bench_index: int
    judged: JudgeUnit
    statistics: StatisticsSettings = field(default_factory=StatisticsSettings)  # how its intervals are made
    probe: str | None = None  # the probe key whose calibrated threshold it is scored at (`threshold: calibrated`)

    @property
    def run(self) -> RunUnit:
        return self.judged.run

    @property
    def benchmark(self) -> str:
        return self.run.data.entry.name

    @property
    def entry(self) -> str:
        """The entry's name in every view and key of this cell (`benchmark` is the registry's name)."""
        return self.run.data.name

    @property
    def agent(self) -> str:
        return self.run.agent.name

    @property
    def backbone(self) -> str | None:
        return self.run.backbone

    @property
    def retriever(self) -> str:
        return self.run.index.retriever.name if self.run.index else "-"

    @property
    def judge(self) -> str:
        return self.judged.judge.name

    @property
    def judge_model(self) -> str | None:
        return self.judged.model.name if self.judged.model else None

    @property
    def name(self) -> str:
        return "/".join([self.entry, self.agent, self.backbone or "-", self.retriever, self.judge]) + \
            control_label(self.run.control)


@dataclass
class AnalysisUnit:
    """The cross-cell tables and figures of one benchmark entry."""

    key: str
    bench_index: int
    data: DataUnit
    cells: list[Cell]
    statistics: StatisticsSettings = field(default_factory=StatisticsSettings)


@dataclass
class Plan:
    exp: ResolvedExperiment
    data: list[DataUnit] = field(default_factory=list)
    index: list[IndexUnit] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)
    analyses: list[AnalysisUnit] = field(default_factory=list)

    def runs(self) -> list[RunUnit]:
        """Each distinct run once (judges, and retrievers an agent does not use, share runs)."""
        return list({c.run.key: c.run for c in self.cells}.values())

    def judgings(self) -> list[JudgeUnit]:
        return list({c.judged.key: c.judged for c in self.cells}.values())
