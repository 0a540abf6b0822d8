"""The experiment as a DAG of content-addressed units, with every key known before anything runs.

A key hashes the keys of a unit's inputs and the configuration that can change
its output, so a re-run recomputes exactly what a change reaches: a new judge
gets new judge keys but the same run keys, and its agents are not re-run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perseval.config import AgentConfig, BenchmarkEntry, JudgeConfig, ModelConfig, ResolvedExperiment, RetrieverConfig
from perseval.errors import ConfigError
from perseval.hashing import content_key
from perseval.registry import agent_class, benchmark_class
from perseval.stages import judge_done, run_done

# Bump when a stage's code changes what it writes, to invalidate old outputs.
STAGE_VERSIONS = {"data": 2, "index": 1, "run": 2, "judge": 1, "score": 1, "analysis": 2}


def model_fingerprint(cfg: ModelConfig) -> dict[str, Any]:
    """What can change a model's answers (not ports, concurrency or timeouts)."""
    return cfg.model_dump(include={"kind", "model", "revision", "gguf", "n_ctx", "base_url", "sampling"})


def source_fingerprint(source: str | None) -> list[Any]:
    """An ingested release folder: its files' names, sizes and mtimes, so an edited file re-ingests."""
    if not source:
        return []
    root = Path(source)
    return [(str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()]


def data_key(entry: BenchmarkEntry, seed: int) -> str:
    return content_key("data", STAGE_VERSIONS["data"], entry.name, entry.sample, seed, entry.params,
                       entry.source, source_fingerprint(entry.source))


def index_key(dkey: str, retriever: RetrieverConfig) -> str:
    return content_key("index", STAGE_VERSIONS["index"], dkey, retriever.model_dump(exclude={"name", "top_k"}))


def run_key(dkey: str, ikey: str, agent: AgentConfig, model: ModelConfig | None, repeats: int, seed: int) -> str:
    return content_key("run", STAGE_VERSIONS["run"], dkey, ikey, agent.model_dump(exclude={"name"}),
                       model_fingerprint(model) if model else None, repeats, seed)


def judge_key(rkey: str, judge: JudgeConfig | None, judge_model: ModelConfig | None) -> str:
    if judge is None:
        return content_key("judge", STAGE_VERSIONS["judge"], rkey, "rule")
    return content_key("judge", STAGE_VERSIONS["judge"], rkey, judge.model_dump(exclude={"name"}),
                       model_fingerprint(judge_model) if judge_model else None)


@dataclass
class Cell:
    """benchmark x agent x backbone x retriever x judge: one MLflow child run, one score table."""

    benchmark: str
    bench_index: int
    agent: str
    backbone: str | None  # None for agents that use no model (oracles)
    retriever: str
    judge: str  # a judge name, or "rule"
    data_key: str
    index_key: str
    run_key: str
    judge_key: str

    @property
    def name(self) -> str:
        return "/".join([self.benchmark, self.agent, self.backbone or "-", self.retriever, self.judge])

    @property
    def score_key(self) -> str:
        return content_key("score", STAGE_VERSIONS["score"], self.judge_key)


@dataclass
class Plan:
    exp: ResolvedExperiment
    data: dict[int, str] = field(default_factory=dict)  # benchmark entry index -> data key
    index: dict[tuple[int, str], str] = field(default_factory=dict)  # (entry, retriever) -> index key
    cells: list[Cell] = field(default_factory=list)

    def runs(self) -> dict[str, Cell]:
        """One representative cell per distinct run key (judges share agent runs)."""
        return {c.run_key: c for c in self.cells}

    def judgings(self) -> dict[str, Cell]:
        return {c.judge_key: c for c in self.cells}


def entry_seed(exp: ResolvedExperiment, entry: BenchmarkEntry) -> int:
    return entry.seed if entry.seed is not None else exp.experiment.seed


def make_plan(exp: ResolvedExperiment) -> Plan:
    e = exp.experiment
    plan = Plan(exp)
    for bi, entry in enumerate(e.benchmarks):
        bench_cls = benchmark_class(entry.name)
        dkey = plan.data[bi] = data_key(entry, entry_seed(exp, entry))
        for rname in e.retrievers:
            ikey = plan.index[(bi, rname)] = index_key(dkey, exp.retrievers[rname])
            for aname in entry.agents:
                agent = exp.agents[aname]
                if entry.name not in agent_class(agent.kind).benchmarks:
                    raise ConfigError(f"{exp.path}: agent {aname!r} ({agent.kind}) does not support benchmark "
                                      f"{entry.name!r}")
                backbones: list[str | None] = list(e.backbones) if agent_class(agent.kind).uses_llm else [None]
                for bb in backbones:
                    rkey = run_key(dkey, ikey, agent, exp.models[bb] if bb else None, e.repeats, e.seed)
                    judges: list[str | None] = list(e.judges) if bench_cls.uses_llm_judge else [None]
                    if not judges:
                        raise ConfigError(f"{exp.path}: key 'judges' is empty but benchmark {entry.name!r} "
                                          "needs an LLM judge")
                    for jname in judges:
                        jcfg = exp.judges[jname] if jname else None
                        jkey = judge_key(rkey, jcfg, exp.models[jcfg.model] if jcfg else None)
                        plan.cells.append(Cell(entry.name, bi, aname, bb, rname, jname or "rule", dkey, ikey,
                                               rkey, jkey))
    return plan


def shard_specs(n_instances: int, shard_size: int) -> list[int]:
    return list(range(max(1, -(-n_instances // shard_size))))


def pending_models(plan: Plan, root: str, n_instances: dict[str, int]) -> set[str]:
    """Models that some unfinished run or judge shard needs: only these are served."""
    size = plan.exp.experiment.shard_size
    needed: set[str] = set()
    for cell in plan.cells:
        shards = shard_specs(n_instances[cell.data_key], size)
        if cell.backbone and not all(run_done(root, cell.run_key, s) for s in shards):
            needed.add(cell.backbone)
        if cell.judge != "rule" and not all(judge_done(root, cell.judge_key, cell.run_key, s) for s in shards):
            needed.add(plan.exp.judges[cell.judge].model)
    return needed


def cell_identity(exp: ResolvedExperiment, cell: Cell) -> dict[str, Any]:
    agent = exp.agents[cell.agent]
    return {"name": cell.name, "agent": cell.agent, "agent_kind": agent.kind, "agent_params": agent.params,
            "backbone": cell.backbone, "retriever": cell.retriever, "judge": cell.judge, "score_key": cell.score_key}


def analysis_units(plan: Plan) -> dict[int, tuple[str, list[dict[str, Any]]]]:
    """Per benchmark entry: the analysis key (over all its cells' score keys) and the cells it reads."""
    units: dict[int, tuple[str, list[dict[str, Any]]]] = {}
    for bi, entry in enumerate(plan.exp.experiment.benchmarks):
        cells = [cell_identity(plan.exp, c) for c in plan.cells if c.bench_index == bi]
        key = content_key("analysis", STAGE_VERSIONS["analysis"], entry.params, cells)
        units[bi] = (key, cells)
    return units
