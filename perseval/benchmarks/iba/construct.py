"""Seeded, template-based construction of IBA-Bench instances and histories.

Per instance: a persona, one value per constrained dimension (old -> new for a
dynamic one), implicit evidence turns for those values, and task-irrelevant
noise turns around them at `noise_per_evidence` noise turns per evidence
turn. Each instance gets its own user, so a user's history holds exactly the
evidence its gold depends on; every evidence turn carries its ground truth in
`Document.meta` for oracle agents and for tests.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping

from perseval.benchmarks.base import BenchmarkData
from perseval.benchmarks.iba.noise import noise_turn
from perseval.benchmarks.iba.personas import Persona, sample_persona, transition_phrase
from perseval.benchmarks.iba.taxonomy import Dimension, Scenario, Taxonomy, Value
from perseval.errors import ConfigError
from perseval.records import Document, Instance

# Share of each evidence kind: implicit behaviour dominates, direct statements are occasional.
KIND_WEIGHTS = {"behaviour": 0.35, "correction": 0.25, "complaint": 0.15, "rejection": 0.15, "statement": 0.10}
# A change of preference is announced more explicitly than it is acted out.
NEW_PHASE_WEIGHTS = {"behaviour": 0.10, "correction": 0.40, "complaint": 0.15, "rejection": 0.15, "statement": 0.20}
# Instances by number of constraints, overall row of Table 2 (1, 2, 3, 4, 5+), in percent.
CONSTRAINT_WEIGHTS = {1: 4, 2: 16, 3: 35, 4: 29, 5: 16}
PHASE_ORDER = {"old": 0, "static": 1, "new": 2}
ACKS = (
    "Got it, I'll keep that in mind.",
    "Understood, updated.",
    "Noted.",
    "Makes sense, I've adjusted it.",
    "Thanks for telling me.",
    "Sounds good!",
)


@dataclass(frozen=True)
class ConstructParams:
    noise_per_evidence: float = 100.0  # the paper: about one task-relevant turn per 100
    dynamic_rate: float = 0.3  # chance that a dimension with shifts gets a dynamic preference
    extra_evidence_rate: float = 0.3  # chance of a second evidence turn for one value
    scenarios: tuple[str, ...] | None = None  # scenario names; None: all

    @classmethod
    def from_mapping(cls, params: Mapping[str, Any] | None) -> "ConstructParams":
        params = dict(params or {})
        unknown = set(params) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"iba params: unknown keys {sorted(unknown)}; known: {sorted(cls.__dataclass_fields__)}")
        names = params.get("scenarios")
        if isinstance(names, str):
            names = [names]
        out = cls(
            noise_per_evidence=float(params.get("noise_per_evidence", cls.noise_per_evidence)),
            dynamic_rate=float(params.get("dynamic_rate", cls.dynamic_rate)),
            extra_evidence_rate=float(params.get("extra_evidence_rate", cls.extra_evidence_rate)),
            scenarios=tuple(str(n) for n in names) if names else None,
        )
        if out.noise_per_evidence < 0:
            raise ConfigError("iba params: key 'noise_per_evidence' must be >= 0")
        for key in ("dynamic_rate", "extra_evidence_rate"):
            if not 0.0 <= getattr(out, key) <= 1.0:
                raise ConfigError(f"iba params: key '{key}' must lie in [0, 1]")
        return out


@dataclass(frozen=True)
class Preference:
    dimension: Dimension
    value: str  # the gold (current) value
    previous: str | None = None  # set for a dynamic preference: the value it replaced

    @property
    def dynamic(self) -> bool:
        return self.previous is not None


@dataclass(frozen=True)
class Evidence:
    dimension: str
    value: str
    kind: str
    phase: str  # static | old | new
    text: str


# --- choices -----------------------------------------------------------------


def plan_scenarios(taxonomy: Taxonomy, sample: int, names: tuple[str, ...] | None) -> list[Scenario]:
    """Scenario of each instance: alternate action types, round-robin scenarios within a type."""
    try:
        pool = [taxonomy.scenario(n) for n in names] if names else list(taxonomy.scenarios)
    except KeyError as exc:
        raise ConfigError(f"iba params: key 'scenarios': {exc.args[0]}") from None
    by_type = {t: [s for s in pool if s.action_type == t] for t in ("generate", "call_api")}
    types = [t for t, group in by_type.items() if group]
    used: Counter[str] = Counter()
    plan = []
    for i in range(sample):
        t = types[i % len(types)]
        plan.append(by_type[t][used[t] % len(by_type[t])])
        used[t] += 1
    return plan


def choose_preferences(scenario: Scenario, rng: random.Random, params: ConstructParams) -> list[Preference]:
    """Constrained dimensions and their values; CallAPI constrains every personal slot."""
    dims = list(scenario.dimensions)
    if scenario.action_type == "generate":
        k = rng.choices(list(CONSTRAINT_WEIGHTS), weights=list(CONSTRAINT_WEIGHTS.values()))[0]
        k = min(len(dims), k if k < 5 else rng.randint(5, max(5, len(dims))))
        chosen = set(rng.sample(range(len(dims)), k))
        dims = [d for i, d in enumerate(dims) if i in chosen]  # keep taxonomy order
    prefs = []
    for dim in dims:
        if scenario.dynamic and dim.shifts and rng.random() < params.dynamic_rate:
            old, new = rng.choice(dim.shifts)
            prefs.append(Preference(dim, new, old))
        else:
            prefs.append(Preference(dim, rng.choice(dim.value_ids)))
    return prefs


def _pick_kinds(value: Value, n: int, rng: random.Random, weights: Mapping[str, float]) -> list[str]:
    """n evidence kinds for one value, distinct while the value has enough kinds."""
    chosen: list[str] = []
    for _ in range(n):
        pool = [k for k in value.evidence if k not in chosen] or list(value.evidence)
        chosen.append(rng.choices(pool, weights=[weights.get(k, 0.1) for k in pool])[0])
    return chosen


def _turns(dim: Dimension, value_id: str, phase: str, rng: random.Random, params: ConstructParams,
           persona: Persona) -> list[Evidence]:
    value = dim.value(value_id)
    n = 1 + (rng.random() < params.extra_evidence_rate)
    weights = NEW_PHASE_WEIGHTS if phase == "new" else KIND_WEIGHTS
    out = []
    for kind in _pick_kinds(value, n, rng, weights):
        text = rng.choice(value.evidence[kind])
        if phase == "new":
            text = f"{transition_phrase(persona, rng)} {text}"
        out.append(Evidence(dim.id, value_id, kind, phase, text))
    return out


def evidence_for(pref: Preference, persona: Persona, rng: random.Random, params: ConstructParams) -> list[Evidence]:
    if not pref.dynamic:
        return _turns(pref.dimension, pref.value, "static", rng, params, persona)
    old = _turns(pref.dimension, pref.previous or "", "old", rng, params, persona)
    return old + _turns(pref.dimension, pref.value, "new", rng, params, persona)


# --- history -----------------------------------------------------------------


def order_evidence(evidence: list[Evidence], rng: random.Random) -> list[Evidence]:
    """A random order in which each dimension's old-phase turns precede its new-phase turns."""
    order = list(evidence)
    rng.shuffle(order)
    by_dim: dict[str, list[int]] = {}
    for i, ev in enumerate(order):
        by_dim.setdefault(ev.dimension, []).append(i)
    for idxs in by_dim.values():
        turns = sorted((order[i] for i in idxs), key=lambda e: PHASE_ORDER[e.phase])
        for i, turn in zip(idxs, turns):
            order[i] = turn
    return order


def timestamps(n: int, rng: random.Random) -> list[str]:
    """n strictly increasing ISO timestamps, minutes to hours apart."""
    t = datetime(2025, 1, 6, 7, 30) + timedelta(minutes=rng.randint(0, 60 * 24 * 30))
    out = []
    for _ in range(n):
        t += timedelta(minutes=rng.randint(2, 180))
        out.append(t.isoformat(timespec="seconds"))
    return out


def write_history(user_id: str, scenario: Scenario, evidence: list[Evidence], n_noise: int,
                  persona: Persona, rng: random.Random) -> list[Document]:
    ordered = order_evidence(evidence, rng)
    total = len(ordered) + n_noise
    at = dict(zip(sorted(rng.sample(range(total), len(ordered))), ordered))
    docs = []
    for i, stamp in enumerate(timestamps(total, rng)):
        ev = at.get(i)
        if ev is None:
            text, meta = noise_turn(rng, persona), {"kind": "noise"}
        else:
            text = f"User: {ev.text}\nAssistant: {rng.choice(ACKS)}"
            meta = {"scenario": scenario.name, "dimension": ev.dimension, "value": ev.value,
                    "kind": ev.kind, "dynamic_phase": ev.phase}
        docs.append(Document(owner=user_id, doc_id=f"{user_id}-t{i:05d}", text=text, timestamp=stamp, meta=meta))
    return docs


# --- instances -----------------------------------------------------------------


def _action_parts(scenario: Scenario, prefs: list[Preference], case: Mapping[str, Any]) -> tuple[dict, dict]:
    """(payload part, gold part) specific to the action type."""
    if scenario.api is None:
        checkpoints = [{"id": p.dimension.id, "dimension": p.dimension.id, "value": p.value,
                        "statement": p.dimension.value(p.value).checkpoint} for p in prefs]
        return {}, {"checkpoints": checkpoints}
    api = scenario.api
    gold_by_dim = {p.dimension.id: p.value for p in prefs}
    slots = [{"name": s.name, "type": s.type, "values": list(s.values), "description": s.description}
             for s in api.slots]
    payload = {"api": {"name": api.name, "description": api.description, "slots": slots,
                       "task_fixed": {s.name: case[s.from_task] for s in api.fixed_slots}}}
    gold = {"slots": {s.name: gold_by_dim[s.dimension] for s in api.personal_slots if s.dimension in gold_by_dim}}
    return payload, gold


def build_instance(index: int, scenario: Scenario, seed: int,
                   params: ConstructParams) -> tuple[Instance, list[Document]]:
    # one RNG per instance, seeded by (seed, index): an instance does not change when sample grows
    rng = random.Random(f"iba:{seed}:{index}")
    user_id = f"iba-u{index:04d}"
    persona = sample_persona(rng)
    case = rng.choice(scenario.cases)
    query = rng.choice(scenario.tasks).format(**case)
    prefs = choose_preferences(scenario, rng, params)
    evidence = [ev for p in prefs for ev in evidence_for(p, persona, rng, params)]
    n_noise = round(len(evidence) * params.noise_per_evidence)
    docs = write_history(user_id, scenario, evidence, n_noise, persona, rng)
    action_payload, action_gold = _action_parts(scenario, prefs, case)
    payload = {"scenario": scenario.name, "action_type": scenario.action_type, **action_payload,
               "n_evidence": len(evidence), "n_constraints": len(prefs)}
    gold = {**action_gold,
            "preferences": [{"dimension": p.dimension.id, "value": p.value, "previous": p.previous,
                             "dynamic": p.dynamic} for p in prefs],
            "n_dynamic": sum(p.dynamic for p in prefs), "persona": persona.to_dict()}
    instance = Instance(f"iba-{index:04d}-{scenario.slug}", "iba", user_id, scenario.domain, query, payload, gold)
    return instance, docs


def _bucket(n: int) -> str:
    return "5+" if n >= 5 else str(n)


def construction_info(instances: list[Instance], documents: list[Document], params: ConstructParams) -> dict[str, Any]:
    """Counts in the shape of Table 2, plus the noise ratio actually achieved."""
    n_evidence = sum(i.payload["n_evidence"] for i in instances)
    n_noise = len(documents) - n_evidence
    return {
        "n_instances": len(instances),
        "n_users": len({i.user_id for i in instances}),
        "n_documents": len(documents),
        "n_evidence": n_evidence,
        "n_noise": n_noise,
        "noise_per_evidence": params.noise_per_evidence,
        "noise_ratio": n_noise / n_evidence if n_evidence else 0.0,
        "n_dynamic_preferences": sum(i.gold["n_dynamic"] for i in instances),
        "by_action_type": dict(Counter(i.payload["action_type"] for i in instances)),
        "by_scenario": dict(Counter(i.payload["scenario"] for i in instances)),
        "by_domain": dict(Counter(i.group for i in instances)),
        "evidence_hist": dict(Counter(_bucket(i.payload["n_evidence"]) for i in instances)),
        "constraints_hist": dict(Counter(_bucket(i.payload["n_constraints"]) for i in instances)),
    }


def construct(taxonomy: Taxonomy, *, sample: int, seed: int, params: ConstructParams) -> BenchmarkData:
    """`sample` instances balanced across action types and scenarios, with their users' histories."""
    instances: list[Instance] = []
    documents: list[Document] = []
    for index, scenario in enumerate(plan_scenarios(taxonomy, sample, params.scenarios)):
        inst, docs = build_instance(index, scenario, seed, params)
        instances.append(inst)
        documents.extend(docs)
    return BenchmarkData(instances, documents, construction_info(instances, documents, params))
