"""Seeded, template-based construction of IBA-Bench instances and histories.

Per instance: a persona, one value per constrained dimension (old -> new for a
dynamic one), implicit evidence turns for those values, and task-irrelevant
noise turns around them at `noise_per_evidence` noise turns per evidence
turn. Each instance gets its own history owner (`user_id`), so a history holds
exactly the evidence its gold depends on (two instances of one persona draw
their preferences independently: one merged history would contradict one of
the golds); every evidence turn carries its ground truth in `Document.meta`
for oracle agents and for tests. Instances of one seed persona share a user
for the statistics: `gold["cluster"]` names the persona, and intervals cluster
by it (perseval.metrics.ci_tables.cluster_of).

Two distributions of the per-instance counts:
  simple  the thin slice's: balanced action types and scenarios, one or two
          evidence turns per value, constraints from Table 2's overall row
  table2  Table 2 per domain: instances per domain (and per scenario, Table 13's
          I when the taxonomy gives it), #evidence and #constraints quotas; a
          turn may carry several preferences so that one evidence item can back
          three constraints, as the paper's counts require
`full_size: true` (or sample = 6962) builds the paper's size with `table2`.
The build streams instance by instance (`iter_build`), so a writer can put a
full-size build on disk without holding a million history turns in memory.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, Iterator, Literal, Mapping

from pydantic import Field, field_validator

from perseval.benchmarks.base import BenchmarkData
from perseval.benchmarks.iba import distribution as dist
from perseval.benchmarks.iba.evidence import (Preference, Signal, Support, order_signals, plan_turns, realise,
                                              simple_signals, turn_meta, turn_text)
from perseval.benchmarks.iba.noise import noise_turn
from perseval.benchmarks.iba.personas import Persona, persona_cluster, sample_persona
from perseval.benchmarks.iba.stats import ConstructionStats
from perseval.benchmarks.iba.taxonomy import Scenario, Taxonomy
from perseval.core.errors import ConfigError
from perseval.kernel.params import Params
from perseval.core.instances import Document, Instance
from perseval.metrics.ci_tables import CLUSTER

# Instances by number of constraints, overall row of Table 2 (1, 2, 3, 4, 5+), in percent.
CONSTRAINT_WEIGHTS = {1: 4, 2: 16, 3: 35, 4: 29, 5: 16}
# One meta dict shared by every noise turn: a full-size build has over a million of them.
# Treat Document.meta as read-only (the pipeline only serialises it).
NOISE_META: dict[str, Any] = {"kind": "noise"}


class ConstructParams(Params):
    noise_per_evidence: float = Field(100.0, ge=0)  # the paper: about one task-relevant turn per 100
    dynamic_rate: float = Field(0.3, ge=0, le=1)  # chance that a dimension with shifts gets a dynamic preference
    extra_evidence_rate: float = Field(0.3, ge=0, le=1)  # simple: chance of a second evidence turn for one value
    scenarios: tuple[str, ...] | None = None  # scenario names; None: all
    distribution: Literal["simple", "table2"] = "simple"
    full_size: bool = False  # Table 2's instance counts (6,962 with the full taxonomy)
    # Table 5's ablations: a seeded subset of this many of the build's instances, stratified by domain; each
    # instance is the one the whole build makes (same index, same seed), so it is a true subset
    subset: int | None = Field(None, ge=1)
    key_compatible: ClassVar[dict[str, Any]] = {"subset": None}  # added later: old keys stay valid

    @field_validator("scenarios", mode="before")
    @classmethod
    def _one_name(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else (value or None)

    def is_full_size(self, sample: int) -> bool:
        return self.full_size or sample == dist.FULL_SIZE

    def uses_table2(self, sample: int) -> bool:
        return self.distribution == "table2" or self.is_full_size(sample)


@dataclass(frozen=True)
class InstanceSpec:
    """What the planner fixes before an instance is drawn; counts are None in the simple distribution."""

    index: int
    scenario: Scenario
    n_evidence: int | None = None
    n_constraints: int | None = None


@dataclass
class BuildPlan:
    specs: list[InstanceSpec]
    notes: dict[str, Any] = field(default_factory=dict)  # planner facts for the info (clamps, gaps)


# --- planning -----------------------------------------------------------------------------


def _pool(taxonomy: Taxonomy, names: tuple[str, ...] | None) -> list[Scenario]:
    try:
        return [taxonomy.scenario(n) for n in names] if names else list(taxonomy.scenarios)
    except KeyError as exc:
        raise ConfigError(f"iba params: key 'scenarios': {exc.args[0]}") from None


def plan_scenarios(taxonomy: Taxonomy, sample: int, names: tuple[str, ...] | None) -> list[Scenario]:
    """Simple distribution: alternate action types, round-robin scenarios within a type."""
    pool = _pool(taxonomy, names)
    by_type = {t: [s for s in pool if s.action_type == t] for t in ("generate", "call_api")}
    types = [t for t, group in by_type.items() if group]
    used: Counter[str] = Counter()
    plan = []
    for i in range(sample):
        t = types[i % len(types)]
        plan.append(by_type[t][used[t] % len(by_type[t])])
        used[t] += 1
    return plan


def plan_table2(taxonomy: Taxonomy, sample: int, seed: int, params: ConstructParams) -> BuildPlan:
    """Table 2 distribution: scenario counts, then per-domain evidence and constraint quotas."""
    full = params.is_full_size(sample)
    counts = dist.scenario_counts(taxonomy, _pool(taxonomy, params.scenarios), None if full else sample)
    scenarios = [taxonomy.scenario(n) for n, k in counts.items() for _ in range(k)]
    rng = random.Random(f"iba-plan:{seed}")
    rng.shuffle(scenarios)  # shards mix domains and scenarios
    n_ev: dict[int, int] = {}
    n_con: dict[int, int] = {}
    clamped = 0
    for domain in dict.fromkeys(s.domain for s in scenarios):
        idx = [i for i, s in enumerate(scenarios) if s.domain == domain]
        row = dist.row_for(domain)
        n_ev.update(zip(idx, dist.evidence_counts(len(idx), row, rng)))
        con, k = dist.constraint_counts([len(scenarios[i].dimensions) for i in idx], row, rng)
        n_con.update(zip(idx, con))
        clamped += k
    specs = [InstanceSpec(i, s, n_ev[i], n_con[i]) for i, s in enumerate(scenarios)]
    notes: dict[str, Any] = {"clamped_constraints": clamped}
    if full:
        notes["missing_domains"] = dist.missing_domains(taxonomy)
    return BuildPlan(specs, notes)


def plan_build(taxonomy: Taxonomy, *, sample: int, seed: int, params: ConstructParams) -> BuildPlan:
    if params.uses_table2(sample):
        plan = plan_table2(taxonomy, sample, seed, params)
    else:
        plan = BuildPlan([InstanceSpec(i, s) for i, s in enumerate(plan_scenarios(taxonomy, sample, params.scenarios))])
    if params.subset is not None and params.subset < len(plan.specs):
        plan = BuildPlan(stratified_subset(plan.specs, params.subset, seed), {**plan.notes, "subset_of": len(plan.specs)})
    return plan


def stratified_subset(specs: list[InstanceSpec], k: int, seed: int) -> list[InstanceSpec]:
    """k of `specs`, each domain holding its share (largest remainders), drawn with a seeded RNG; in index
    order, so the subset's instances are built exactly as in the whole build."""
    by_domain: dict[str, list[InstanceSpec]] = {}
    for spec in specs:
        by_domain.setdefault(spec.scenario.domain, []).append(spec)
    quota = {d: k * len(group) / len(specs) for d, group in by_domain.items()}
    take = {d: int(q) for d, q in quota.items()}
    for d in sorted(quota, key=lambda d: (take[d] - quota[d], d))[:k - sum(take.values())]:
        take[d] += 1  # the largest remainders first
    rng = random.Random(f"iba-subset:{seed}")
    chosen = [s for d, group in by_domain.items() for s in rng.sample(group, take[d])]
    return sorted(chosen, key=lambda s: s.index)


# --- one instance ---------------------------------------------------------------------------


def _n_constraints(scenario: Scenario, rng: random.Random) -> int:
    """Simple distribution: Generate(text) draws a count, CallAPI constrains every personal slot."""
    n = len(scenario.dimensions)
    if scenario.action_type != "generate":
        return n
    k = rng.choices(list(CONSTRAINT_WEIGHTS), weights=list(CONSTRAINT_WEIGHTS.values()))[0]
    return min(n, k if k < 5 else rng.randint(5, max(5, n)))


def choose_preferences(scenario: Scenario, rng: random.Random, params: ConstructParams,
                       k: int | None = None, n_evidence: int | None = None) -> list[Preference]:
    """Constrained dimensions (taxonomy order) and their values; dynamic ones need two evidence turns."""
    dims = list(scenario.dimensions)
    k = _n_constraints(scenario, rng) if k is None else min(k, len(dims))
    if k < len(dims):
        chosen = set(rng.sample(range(len(dims)), k))
        dims = [d for i, d in enumerate(dims) if i in chosen]
    can_change = scenario.dynamic and (n_evidence is None or n_evidence >= 2)
    prefs = []
    for dim in dims:
        if can_change and dim.shifts and rng.random() < params.dynamic_rate:
            old, new = rng.choice(dim.shifts)
            prefs.append(Preference(dim.id, new, old))
        else:
            prefs.append(Preference(dim.id, rng.choice(dim.value_ids)))
    return prefs


def evidence_turns(prefs: list[Preference], spec: InstanceSpec, rng: random.Random,
                   params: ConstructParams) -> list[list[Signal]]:
    if spec.n_evidence is None:
        return [[s] for s in order_signals(simple_signals(prefs, params.extra_evidence_rate, rng), rng)]
    return plan_turns(prefs, spec.n_evidence, rng)


def timestamps(n: int, rng: random.Random) -> list[str]:
    """n strictly increasing ISO timestamps, minutes to hours apart."""
    t = datetime(2025, 1, 6, 7, 30) + timedelta(minutes=rng.randint(0, 60 * 24 * 30))
    out = []
    for _ in range(n):
        t += timedelta(minutes=rng.randint(2, 180))
        out.append(t.isoformat(timespec="seconds"))
    return out


def write_history(user_id: str, scenario: Scenario, turns: list[list[Support]], n_noise: int,
                  persona: Persona, rng: random.Random) -> list[Document]:
    """Evidence turns, in their planned order, at random positions among `n_noise` noise turns."""
    total = len(turns) + n_noise
    at = dict(zip(sorted(rng.sample(range(total), len(turns))), turns))
    docs = []
    for i, stamp in enumerate(timestamps(total, rng)):
        supports = at.get(i)
        if supports is None:
            text, meta = noise_turn(rng, persona), NOISE_META
        else:
            text, meta = turn_text(supports, persona, rng), turn_meta(scenario, supports)
        docs.append(Document(owner=user_id, doc_id=f"{user_id}-t{i:05d}", text=text, timestamp=stamp, meta=meta))
    return docs


def _action_parts(scenario: Scenario, prefs: list[Preference], case: Mapping[str, Any]) -> tuple[dict, dict]:
    """(payload part, gold part) specific to the action type."""
    if scenario.api is None:
        checkpoints = [{"id": p.dimension_id, "dimension": p.dimension_id, "value": p.value,
                        "statement": scenario.dimension(p.dimension_id).value(p.value).checkpoint} for p in prefs]
        return {}, {"checkpoints": checkpoints}
    api = scenario.api
    gold_by_dim = {p.dimension_id: p.value for p in prefs}
    slots = [{"name": s.name, "type": s.type, "values": list(s.values), "description": s.description}
             for s in api.slots]
    payload = {"api": {"name": api.name, "description": api.description, "slots": slots,
                       "task_fixed": {s.name: case[s.from_task] for s in api.fixed_slots}}}
    gold = {"slots": {s.name: gold_by_dim[s.dimension] for s in api.personal_slots if s.dimension in gold_by_dim}}
    return payload, gold


def build_instance(spec: InstanceSpec, seed: int, params: ConstructParams) -> tuple[Instance, list[Document]]:
    # one RNG per instance, seeded by (seed, index): in the simple distribution an instance
    # does not change when sample grows
    index, scenario = spec.index, spec.scenario
    rng = random.Random(f"iba:{seed}:{index}")
    user_id = f"iba-u{index:04d}"
    persona = sample_persona(rng)
    case = rng.choice(scenario.cases)
    query = rng.choice(scenario.tasks).format(**case)
    prefs = choose_preferences(scenario, rng, params, spec.n_constraints, spec.n_evidence)
    turns = realise(evidence_turns(prefs, spec, rng, params), scenario, rng)
    n_noise = round(len(turns) * params.noise_per_evidence)
    docs = write_history(user_id, scenario, turns, n_noise, persona, rng)
    action_payload, action_gold = _action_parts(scenario, prefs, case)
    n_dynamic = sum(p.dynamic for p in prefs)
    payload = {"scenario": scenario.name, "action_type": scenario.action_type, **action_payload,
               "n_evidence": len(turns), "n_constraints": len(prefs), "dynamic": n_dynamic > 0}
    gold = {**action_gold,
            "preferences": [{"dimension": p.dimension_id, "value": p.value, "previous": p.previous,
                             "dynamic": p.dynamic} for p in prefs],
            "n_dynamic": n_dynamic, "persona": persona.to_dict(),
            CLUSTER: persona_cluster(persona.persona_id),
            "task_case": dict(case)}  # the task's concrete details: LLM mode must keep them
    instance = Instance(f"iba-{index:04d}-{scenario.slug}", "iba", user_id, scenario.domain, query, payload, gold)
    return instance, docs


# --- whole builds -----------------------------------------------------------------------------


def iter_build(plan: BuildPlan, seed: int, params: ConstructParams) -> Iterator[tuple[Instance, list[Document]]]:
    """Instances one at a time, in plan order, each with its user's history."""
    for spec in plan.specs:
        yield build_instance(spec, seed, params)


def build_stats(params: ConstructParams, plan: BuildPlan, sample: int) -> ConstructionStats:
    """The statistics of one build, empty until its instances are added."""
    return ConstructionStats(noise_per_evidence=params.noise_per_evidence, table2=params.uses_table2(sample),
                             full_size=params.is_full_size(sample), notes=plan.notes)


def construct(taxonomy: Taxonomy, *, sample: int, seed: int, params: ConstructParams) -> BenchmarkData:
    """The whole build in memory: `sample` instances (or the full size) with their users' histories."""
    plan = plan_build(taxonomy, sample=sample, seed=seed, params=params)
    stats = build_stats(params, plan, sample)
    instances: list[Instance] = []
    documents: list[Document] = []
    for inst, docs in iter_build(plan, seed, params):
        stats.add(inst, docs)
        instances.append(inst)
        documents.extend(docs)
    return BenchmarkData(instances, documents, stats.info())
