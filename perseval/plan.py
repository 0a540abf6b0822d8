"""The experiment as a DAG of typed, content-addressed units, with every key known before anything runs.

A key hashes the keys of a unit's inputs and the configuration that can change
its output, so a re-run recomputes exactly what a change reaches: a new judge
gets new judge keys but the same run keys, and its agents are not re-run. Model
configuration enters a key only through the model's identity (weights content,
revision, dtype, quantization) and the role's sampling, never through how it is
served. Tasks take and return these units; the flow decides once per unit
whether it must run (perseval.freshness).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perseval.components import JudgeSpec, benchmark_params, judge_specs, make_agent
from perseval.controls import Control, control_label, control_runs
from perseval.config import (AgentConfig, BenchmarkEntry, ModelConfig, ResolvedExperiment, RetrieverConfig,
                             Sampling)
from perseval.hashing import content_key
from perseval.llm.identity import model_identity
from perseval.registry import benchmark_class

# Bump when a stage's code changes what it writes, to invalidate old outputs.
STAGE_VERSIONS = {"data": 4, "index": 2, "run": 4, "judge": 3, "score": 3, "analysis": 4}


def source_fingerprint(source: str | None) -> list[Any]:
    """An ingested release folder: its files' names, sizes and mtimes, so an edited file re-ingests."""
    if not source:
        return []
    root = Path(source)
    return [(str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()]


def model_fingerprint(model: ModelConfig, sampling: Sampling) -> dict[str, Any]:
    """What can change a model's answers in one role: its identity and the role's sampling."""
    return {"identity": model_identity(model), "sampling": sampling.model_dump()}


# --- units ---------------------------------------------------------------------------------------------

@dataclass
class DataUnit:
    """A benchmark entry's instances and histories (constructed, or ingested from `entry.source`)."""

    key: str
    entry: BenchmarkEntry
    seed: int
    construction: dict[str, ModelConfig] = field(default_factory=dict)  # role -> model (LLM-mode builds)


@dataclass
class IndexUnit:
    """Every owner's history chunked and indexed by one retriever."""

    key: str
    data: DataUnit
    retriever: RetrieverConfig


@dataclass
class RunUnit:
    """One agent on one backbone over a benchmark's instances (mapped per shard)."""

    key: str
    data: DataUnit
    index: IndexUnit | None  # None: the agent uses neither retrieval nor search, so no retriever reaches it
    agent: AgentConfig
    backbone: str | None  # None: an agent that uses no model (oracles)
    model: ModelConfig | None
    repeats: int
    seed: int
    control: Control | None = None  # a control variant (perseval.controls); None: the plain run

    @property
    def label(self) -> str:
        return f"{self.data.entry.name}/{self.agent.name}/{self.backbone or '-'}{control_label(self.control)}"


@dataclass
class JudgeUnit:
    """One judge binding over one run's outputs (mapped per shard)."""

    key: str
    run: RunUnit
    judge: JudgeSpec
    model: ModelConfig | None  # the judge model (None for rule judges)
    seed: int


@dataclass
class Cell:
    """benchmark x agent x backbone x retriever x judge: one score table, one MLflow child run."""

    key: str  # the score key
    bench_index: int
    judged: JudgeUnit

    @property
    def run(self) -> RunUnit:
        return self.judged.run

    @property
    def benchmark(self) -> str:
        return self.run.data.entry.name

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
        return self.judged.judge.model

    @property
    def name(self) -> str:
        return "/".join([self.benchmark, self.agent, self.backbone or "-", self.retriever, self.judge]) + \
            control_label(self.run.control)


@dataclass
class AnalysisUnit:
    """The cross-cell tables and figures of one benchmark entry."""

    key: str
    bench_index: int
    data: DataUnit
    cells: list[Cell]


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


# --- keys ----------------------------------------------------------------------------------------------

def data_key(entry: BenchmarkEntry, params: Any, seed: int, construction: dict[str, ModelConfig]) -> str:
    models = {role: model_fingerprint(m, m.sampling) for role, m in sorted(construction.items())}
    return content_key("data", STAGE_VERSIONS["data"], entry.name, entry.sample, seed, params.model_dump(mode="json"),
                       entry.source, source_fingerprint(entry.source), models)


def index_key(dkey: str, retriever: RetrieverConfig) -> str:
    return content_key("index", STAGE_VERSIONS["index"], dkey, retriever.model_dump(exclude={"name"}))


def run_key(dkey: str, ikey: str | None, agent: AgentConfig, params: Any, model: ModelConfig | None, repeats: int,
            seed: int) -> str:
    return content_key("run", STAGE_VERSIONS["run"], dkey, ikey, agent.name, agent.kind,
                       params.model_dump(mode="json"), model_fingerprint(model, model.sampling) if model else None,
                       repeats, seed)


def judge_key(rkey: str, spec: JudgeSpec, model: ModelConfig | None) -> str:
    fingerprint = model_fingerprint(model, spec.sampling or Sampling()) if model else None
    return content_key("judge", STAGE_VERSIONS["judge"], rkey, spec.name, list(spec.kinds), spec.params,
                       spec.repeats if spec.uses_llm else 1, fingerprint)


def score_key(jkey: str) -> str:
    return content_key("score", STAGE_VERSIONS["score"], jkey)


def entry_seed(exp: ResolvedExperiment, entry: BenchmarkEntry) -> int:
    return entry.seed if entry.seed is not None else exp.experiment.seed


# --- the plan ------------------------------------------------------------------------------------------

def make_plan(exp: ResolvedExperiment) -> Plan:
    e = exp.experiment
    plan = Plan(exp)
    for bi, entry in enumerate(e.benchmarks):
        params = benchmark_params(entry, exp.path, bi)
        roles = benchmark_class(entry.name).construction_models(params, e.backbones)
        construction = {role: exp.models[name] for role, name in roles.items()}
        seed = entry_seed(exp, entry)
        data = DataUnit(data_key(entry, params, seed, construction), entry, seed, construction)
        plan.data.append(data)
        indexes = [IndexUnit(index_key(data.key, exp.retrievers[r]), data, exp.retrievers[r]) for r in e.retrievers]
        plan.index += indexes
        specs = judge_specs(exp, bi)
        cells = {}
        controls = entry.controls if entry.controls is not None else e.controls
        for aname in entry.agents:
            plain = _runs(exp, data, indexes, exp.agents[aname])
            needs = make_agent(exp.agents[aname], exp.file_of("agents", aname)).requires()
            for run in plain + control_runs(plain, needs, controls, seed):
                for spec in specs:
                    model = exp.models[spec.model] if spec.model else None
                    judged = JudgeUnit(judge_key(run.key, spec, model), run, spec, model, e.seed)
                    cell = Cell(score_key(judged.key), bi, judged)
                    cells.setdefault(cell.name, cell)  # an agent that uses no retriever has one cell, not one each
        plan.cells += cells.values()
        cell_list = [c for c in cells.values() if c.run.control is None]  # the paper's tables: plain runs only
        ids = [(c.name, c.agent, exp.agents[c.agent].kind, c.key) for c in cell_list]
        plan.analyses.append(AnalysisUnit(content_key("analysis", STAGE_VERSIONS["analysis"],
                                                      params.model_dump(mode="json"), ids), bi, data, cell_list))
    plan.index = [i for i in plan.index if i.key in {r.index.key for r in plan.runs() if r.index}]  # only used ones
    return plan


def _runs(exp: ResolvedExperiment, data: DataUnit, indexes: list[IndexUnit], agent_cfg: AgentConfig) -> list[RunUnit]:
    """The runs of one agent: per backbone when it uses a model, per retriever when it retrieves or searches."""
    e = exp.experiment
    agent = make_agent(agent_cfg, exp.file_of("agents", agent_cfg.name))
    needs = agent.requires()
    backbones: list[str | None] = list(e.backbones) if "llm" in needs else [None]
    uses_index = "retrieve" in needs or ("search" in needs and agent.search_spec() == "corpus")
    out = []
    for index in (indexes if uses_index else [None]):
        for bb in backbones:
            model = exp.models[bb] if bb else None
            key = run_key(data.key, index.key if index else None, agent_cfg, agent.params, model, e.repeats, e.seed)
            out.append(RunUnit(key, data, index, agent_cfg, bb, model, e.repeats, e.seed))
    return out


def shards(n_instances: int, shard_size: int) -> list[int]:
    return list(range(max(1, -(-n_instances // shard_size))))
