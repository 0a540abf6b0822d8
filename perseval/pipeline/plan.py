"""The experiment as a DAG of typed, content-addressed units, with every key known before anything runs.

A key hashes the keys of a unit's inputs, the version of the stage that computes
it (perseval.pipeline.stages) and the configuration that can change its output, so a re-run
recomputes exactly what a change reaches: a new judge gets new judge keys but the
same run keys, and its agents are not re-run. Model configuration enters a key only
through the model's identity (weights content, revision, dtype, quantization) and
the role's sampling, never through how it is served. Tasks take and return these
units (perseval.pipeline.units); the flow decides once per unit whether it must run
(perseval.pipeline.freshness).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from perseval.pipeline import stages
from perseval.kernel.capabilities import needs_index, needs_model
from perseval.llm.settings import ModelConfig, Sampling
from perseval.metrics.settings import StatisticsSettings
from perseval.retrieval.settings import RetrieverConfig
from perseval.experiment.config import BenchmarkEntry, ResolvedExperiment
from perseval.pipeline.controls import control_runs
from perseval.experiment.entries import entry_ids
from perseval.experiment.load import bound
from perseval.core.hashing import content_key
from perseval.llm.identity import model_identity
from perseval.kernel.params import Params
from perseval.kernel.registry import benchmark_class, retriever_class
from perseval.experiment.specs import AgentSpec, JudgeSpec
from perseval.pipeline.units import AnalysisUnit, Cell, DataUnit, IndexUnit, JudgeUnit, Plan, RunUnit


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


# --- keys ----------------------------------------------------------------------------------------------

def data_key(entry: BenchmarkEntry, params: Params, seed: int, construction: dict[str, ModelConfig]) -> str:
    models = {role: model_fingerprint(m, m.sampling) for role, m in sorted(construction.items())}
    # a label enters only when set: unlabelled entries keep their keys, two labelled ones never share theirs
    label = [{"label": entry.label}] if entry.label is not None else []
    return content_key(*stages.DATA.key_head, entry.name, entry.sample, seed, params.model_dump(mode="json"),
                       entry.source, source_fingerprint(entry.source), models, *label)


def index_key(dkey: str, retriever: RetrieverConfig) -> str:
    # the kind's on-disk layout enters from its first change on (Retriever.layout): an index folder written in
    # another layout is never read as this one, and the keys of kinds that kept theirs stay
    layout = retriever_class(retriever.kind).layout
    return content_key(*stages.INDEX.key_head, dkey, retriever.model_dump(exclude={"name"}),
                       *([{"layout": layout}] if layout > 1 else []))


def run_key(dkey: str, ikey: str | None, agent: AgentSpec, model: ModelConfig | None, repeats: int,
            seed: int, roles: dict[str, ModelConfig] | None = None) -> str:
    # role models enter only when there are some, so the keys of agents without any stay as they were
    role_part = [{r: model_fingerprint(m, m.sampling) for r, m in sorted(roles.items())}] if roles else []
    # likewise the agent's prompt version, from its first change on (Agent.prompt_version)
    prompt_part = [{"prompt_version": agent.prompt_version}] if agent.prompt_version > 1 else []
    return content_key(*stages.RUN.key_head, dkey, ikey, agent.name, agent.kind,
                       agent.params.model_dump(mode="json"), model_fingerprint(model, model.sampling) if model else None,
                       repeats, seed, *role_part, *prompt_part)


def judge_key(rkey: str, spec: JudgeSpec) -> str:
    fingerprint = model_fingerprint(spec.model, spec.sampling) if spec.model and spec.sampling else None
    # an LLM judge's verdicts depend on how they are read (token probabilities, the threshold): rule judges'
    # keys stay as they were
    reading = [verdict_reading(spec)] if spec.uses_llm else []
    return content_key(*stages.JUDGE.key_head, rkey, spec.name, list(spec.kinds), spec.params_json(),
                       spec.repeats if spec.uses_llm else 1, fingerprint, *reading)


def verdict_reading(spec: JudgeSpec) -> dict[str, Any]:
    """How an LLM judge's binary verdicts are read: the request version, the threshold on P(true) and, when off,
    the reasons (the request changes; a judge with reasons keeps its keys)."""
    from perseval.judges.binary import VERDICT_READING

    reasons = {} if spec.reasons else {"reasons": False}
    return {"verdict_reading": VERDICT_READING, "threshold": spec.threshold, **reasons}


def score_key(jkey: str, statistics: StatisticsSettings | None = None, probe: str | None = None) -> str:
    """The statistics settings enter: the score table holds intervals made with them. The weighting enters
    only when it is not the default, so the keys of instance-weighted tables stay as they were. `probe`: the
    key of the probe whose calibrated threshold the cell is scored at (`threshold: calibrated` only, so every
    other score key stays as it was, and a changed probe rescores exactly the cells it calibrates)."""
    settings = (statistics or StatisticsSettings()).model_dump()
    if settings.get("weighting") == "instance":
        del settings["weighting"]
    return content_key(*stages.SCORE.key_head, jkey, settings, *([{"probe": probe}] if probe else []))


def probe_key(data: DataUnit, spec: JudgeSpec, n: int, seed: int) -> str:
    """The key of one judge's probe of one benchmark entry (perseval.pipeline.probes): the data, the judge binding
    (kinds, params, repeats, model identity and sampling, how verdicts are read), N and the seed; a calibrated
    judge's probe also chooses its threshold, so that enters too (only then: other probe keys stay)."""
    assert spec.model is not None and spec.sampling is not None  # probed judges ask a model
    calibrated = [{"calibrated": True}] if spec.calibrated else []
    return content_key(*stages.PROBE.key_head, data.key, spec.name, list(spec.kinds), spec.params_json(),
                       spec.repeats, model_fingerprint(spec.model, spec.sampling), n, seed, verdict_reading(spec),
                       *calibrated)


def entry_statistics(exp: ResolvedExperiment, entry: BenchmarkEntry) -> StatisticsSettings:
    """The statistics of one benchmark entry: the experiment's, with the fields the entry sets over them."""
    own = entry.statistics
    if own is None:
        return exp.experiment.statistics
    return exp.experiment.statistics.model_copy(update={k: getattr(own, k) for k in own.model_fields_set})


def entry_seed(exp: ResolvedExperiment, entry: BenchmarkEntry) -> int:
    """The one seed of a benchmark entry: its own, or the experiment's. Its data, runs (and so every agent,
    through AgentContext.seed and the request seed) and judgings use it."""
    return entry.seed if entry.seed is not None else exp.experiment.seed


# --- the plan ------------------------------------------------------------------------------------------

def make_plan(exp: ResolvedExperiment) -> Plan:
    e, b = exp.experiment, bound(exp)
    plan = Plan(exp)
    names = entry_ids(e.benchmarks)
    for bi, entry in enumerate(e.benchmarks):
        params = b.benchmarks[bi]
        roles = benchmark_class(entry.name).construction_models(params, e.backbones)
        construction = {role: exp.models[name] for role, name in roles.items()}
        seed = entry_seed(exp, entry)
        data = DataUnit(data_key(entry, params, seed, construction), entry, seed, params, construction, names[bi])
        plan.data.append(data)
        indexes = [IndexUnit(index_key(data.key, exp.retrievers[r]), data, exp.retrievers[r], b.retrievers[r])
                   for r in e.retrievers]
        plan.index += indexes
        cells = {}
        controls = entry.controls if entry.controls is not None else e.controls
        statistics = entry_statistics(exp, entry)
        for aname in entry.agents:
            plain = _runs(exp, data, indexes, b.agents[aname])
            for run in plain + control_runs(plain, b.agents[aname].needs, controls, seed):
                for spec in b.judges[bi]:
                    judged = JudgeUnit(judge_key(run.key, spec), run, spec, seed)
                    # validated when the experiment was loaded: a calibrated judge is probed on this entry
                    probe = probe_key(data, spec, e.judge_probes, e.seed) if spec.calibrated else None
                    cell = Cell(score_key(judged.key, statistics, probe), bi, judged, statistics, probe)
                    cells.setdefault(cell.name, cell)  # an agent that uses no retriever has one cell, not one each
        plan.cells += cells.values()
        cell_list = [c for c in cells.values() if c.run.control is None]  # the paper's tables: plain runs only
        ids = [(c.name, c.agent, c.run.agent.kind, c.key) for c in cell_list]
        plan.analyses.append(AnalysisUnit(content_key(*stages.ANALYSIS.key_head, params.model_dump(mode="json"), ids),
                                          bi, data, cell_list, statistics))
    plan.index = [i for i in plan.index if i.key in {r.index.key for r in plan.runs() if r.index}]  # only used ones
    return plan


def _runs(exp: ResolvedExperiment, data: DataUnit, indexes: list[IndexUnit], agent: AgentSpec) -> list[RunUnit]:
    """The runs of one agent: per backbone when it uses a model, per retriever when it retrieves or searches."""
    e = exp.experiment
    models = [exp.models[bb] for bb in e.backbones] if needs_model(agent.needs) else [None]
    roles = {role: exp.models[name] for role, name in agent.roles.items()}
    out = []
    for index in (indexes if needs_index(agent.needs, agent.search) else [None]):
        for model in models:
            key = run_key(data.key, index.key if index else None, agent, model, e.repeats, data.seed, roles)
            out.append(RunUnit(key, data, index, agent, model, e.repeats, data.seed, roles))
    return out
