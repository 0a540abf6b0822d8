"""The IBA-Bench scenario taxonomy: domain -> scenario -> dimension -> values.

Loaded from `scenarios.yaml` (package data) and validated once; a bad file
raises InputError naming the place in the YAML (e.g. `domains[2].scenarios[0]
(scenario 'Food ordering').dimensions[1]`) and the field, so a later edit
fails at load time rather than during construction.

The bundled file holds the 66 scenarios of the paper's Table 13. Counting as
the paper does (Table 14 lists each "preferred A, now B" change as a value of
its dimension), a scenario's P is its static values plus its dynamic shifts:
`Scenario.n_preference_values`; D is `len(Scenario.dimensions)`; I is
`Scenario.instances`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from perseval.core.errors import InputError
from perseval.core.yaml_text import read_yaml_file

DEFAULT_PATH = Path(__file__).with_name("scenarios.yaml")
EVIDENCE_KINDS = ("behaviour", "correction", "complaint", "rejection", "statement")
ActionType = Literal["generate", "call_api"]


@dataclass(frozen=True)
class Value:
    """One mutually exclusive preference value of a dimension."""

    id: str
    label: str
    checkpoint: str  # a statement a judge can check against a response
    evidence: dict[str, tuple[str, ...]]  # kind -> user sentences that reveal this value


@dataclass(frozen=True)
class Dimension:
    id: str
    name: str
    values: tuple[Value, ...]
    shifts: tuple[tuple[str, str], ...] = ()  # allowed dynamic changes (old, new)

    @property
    def dynamic(self) -> bool:
        return bool(self.shifts)

    def value(self, value_id: str) -> Value:
        for v in self.values:
            if v.id == value_id:
                return v
        raise KeyError(f"dimension {self.id!r} has no value {value_id!r}")

    @property
    def value_ids(self) -> list[str]:
        return [v.id for v in self.values]

    @property
    def n_preference_values(self) -> int:
        """Values as the paper counts them: static values plus dynamic shifts."""
        return len(self.values) + len(self.shifts)


@dataclass(frozen=True)
class Slot:
    """An API parameter: task-fixed (from_task) or personalization-relevant (dimension)."""

    name: str
    type: str
    values: tuple[str, ...] = ()  # allowed values; empty = free
    dimension: str | None = None
    from_task: str | None = None
    description: str = ""

    @property
    def personalized(self) -> bool:
        return self.dimension is not None


@dataclass(frozen=True)
class ApiTemplate:
    name: str
    description: str
    slots: tuple[Slot, ...]

    @property
    def fixed_slots(self) -> list[Slot]:
        return [s for s in self.slots if not s.personalized]

    @property
    def personal_slots(self) -> list[Slot]:
        return [s for s in self.slots if s.personalized]


@dataclass(frozen=True)
class Scenario:
    domain: str
    name: str
    action_type: ActionType
    dynamic: bool
    dimensions: tuple[Dimension, ...]
    tasks: tuple[str, ...]
    cases: tuple[dict[str, Any], ...]
    api: ApiTemplate | None = None
    instances: int | None = None  # Table 13's I: task instances in the full-size benchmark

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    def dimension(self, dim_id: str) -> Dimension:
        for d in self.dimensions:
            if d.id == dim_id:
                return d
        raise KeyError(f"scenario {self.name!r} has no dimension {dim_id!r}")

    @property
    def n_values(self) -> int:
        """Static (mutually exclusive) values over all dimensions."""
        return sum(len(d.values) for d in self.dimensions)

    @property
    def n_shifts(self) -> int:
        return sum(len(d.shifts) for d in self.dimensions)

    @property
    def n_preference_values(self) -> int:
        """Table 13's P: static values plus dynamic shifts."""
        return self.n_values + self.n_shifts


@dataclass(frozen=True)
class DomainStats:
    """One row in the shape of Table 2's scale columns."""

    domain: str
    scenarios: int  # S
    dimensions: int  # D
    mean_values: int  # P: preference values per scenario, integer-truncated mean
    instances: int  # I: sum of the scenarios' `instances` (0 where absent)


@dataclass(frozen=True)
class Taxonomy:
    scenarios: tuple[Scenario, ...]
    source: str = ""
    _by_name: dict[str, Scenario] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({s.name: s for s in self.scenarios})

    def scenario(self, name: str) -> Scenario:
        if name not in self._by_name:
            raise KeyError(f"unknown IBA scenario {name!r}; known: {sorted(self._by_name)}")
        return self._by_name[name]

    @property
    def domains(self) -> list[str]:
        return list(dict.fromkeys(s.domain for s in self.scenarios))

    def by_domain(self) -> dict[str, list[Scenario]]:
        out: dict[str, list[Scenario]] = {}
        for s in self.scenarios:
            out.setdefault(s.domain, []).append(s)
        return out

    def domain_stats(self) -> dict[str, DomainStats]:
        """Per domain S, D, truncated mean P and summed I, comparable with Table 2."""
        out = {}
        for domain, group in self.by_domain().items():
            out[domain] = DomainStats(
                domain, len(group), sum(len(s.dimensions) for s in group),
                sum(s.n_preference_values for s in group) // len(group),
                sum(s.instances or 0 for s in group))
        return out


# --- loading and validation -------------------------------------------------

_TEMPLATE_FIELD = re.compile(r"(?<!\{)\{(\w+)\}")


def _label(at: str, kind: str, name: Any) -> str:
    """`domains[0].scenarios[3] (scenario 'Ticket booking')`."""
    return f"{at} ({kind} {name!r})" if name not in (None, "") else at


class _Reader:
    """Parses the YAML mapping while keeping the YAML path for error messages."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, message: str, field_name: str | None = None) -> InputError:
        return InputError(self.path, f"{where}: {message}", field=field_name)

    def need(self, obj: Any, key: str, where: str) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(where, f"must be a mapping, not {type(obj).__name__}")
        if key not in obj or obj[key] in (None, "", []):
            raise self.fail(where, "missing or empty", key)
        return obj[key]

    def items(self, obj: dict[str, Any], key: str, where: str) -> list[Any]:
        raw = self.need(obj, key, where)
        if not isinstance(raw, list):
            raise self.fail(where, f"must be a list, not {type(raw).__name__}", key)
        return raw

    def ident(self, obj: dict[str, Any], key: str, where: str) -> str:
        """An id or name: a plain string (an unquoted `no` or `1` in YAML is not one)."""
        raw = self.need(obj, key, where)
        if not isinstance(raw, str):
            raise self.fail(where, f"must be a string, not {type(raw).__name__} {raw!r} (quote it)", key)
        return raw

    def value(self, raw: dict[str, Any], where: str) -> Value:
        vid = self.ident(raw, "id", where)
        where = _label(where, "value", vid)
        evidence_raw = self.need(raw, "evidence", where)
        if not isinstance(evidence_raw, dict):
            raise self.fail(where, "must map evidence kinds to lists of sentences", "evidence")
        unknown = set(evidence_raw) - set(EVIDENCE_KINDS)
        if unknown:
            raise self.fail(where, f"unknown evidence kinds {sorted(unknown)}; known: {list(EVIDENCE_KINDS)}",
                            "evidence")
        for kind, texts in evidence_raw.items():
            if texts is not None and not (isinstance(texts, list) and all(isinstance(t, str) and t for t in texts)):
                raise self.fail(where, f"evidence kind {kind!r} must be a list of sentences", "evidence")
        evidence = {k: tuple(texts) for k, texts in evidence_raw.items() if texts}
        if not evidence:
            raise self.fail(where, "needs at least one evidence sentence", "evidence")
        return Value(vid, str(self.need(raw, "label", where)), str(self.need(raw, "checkpoint", where)), evidence)

    def dimension(self, raw: dict[str, Any], where: str, dynamic_ok: bool) -> Dimension:
        did = self.ident(raw, "id", where)
        where = _label(where, "dimension", did)
        values = tuple(self.value(v, f"{where}.values[{i}]") for i, v in enumerate(self.items(raw, "values", where)))
        ids = [v.id for v in values]
        if len(values) < 2:
            raise self.fail(where, f"needs at least two mutually exclusive values, has {ids}", "values")
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise self.fail(where, f"value ids must be distinct; repeated: {dup}", "values")
        shifts_raw = raw.get("shifts") or []
        if not isinstance(shifts_raw, list):
            raise self.fail(where, "shifts must be a list of [old, new] pairs", "shifts")
        shifts: list[tuple[str, str]] = []
        for pair in shifts_raw:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise self.fail(where, f"shift {pair!r} must be an [old, new] pair", "shifts")
            a, b = str(pair[0]), str(pair[1])
            if a not in ids or b not in ids or a == b:
                raise self.fail(where, f"shift {[a, b]} must name two different values of {ids}", "shifts")
            if (a, b) in shifts:
                raise self.fail(where, f"shift {[a, b]} is listed twice", "shifts")
            shifts.append((a, b))
        if shifts and not dynamic_ok:
            raise self.fail(where, "has shifts but its scenario is not dynamic", "shifts")
        return Dimension(did, str(raw.get("name", did)), values, tuple(shifts))

    def api(self, raw: dict[str, Any], dims: dict[str, Dimension], case_vars: set[str], where: str) -> ApiTemplate:
        where = f"{where}.api"
        slots: list[Slot] = []
        owner: dict[str, str] = {}  # dimension id -> slot name
        for i, s in enumerate(self.items(raw, "slots", where)):
            at = f"{where}.slots[{i}]"
            name = self.ident(s, "name", at)
            at = _label(at, "slot", name)
            if name in {sl.name for sl in slots}:
                raise self.fail(at, "slot names must be unique", "name")
            dim_id, from_task = s.get("dimension"), s.get("from_task")
            if (dim_id is None) == (from_task is None):
                raise self.fail(at, "needs exactly one of `dimension` or `from_task`")
            if dim_id is not None and dim_id not in dims:
                raise self.fail(at, f"unknown dimension {dim_id!r}; the scenario has {sorted(dims)}", "dimension")
            if dim_id is not None and dim_id in owner:
                raise self.fail(at, f"dimension {dim_id!r} already has slot {owner[dim_id]!r}", "dimension")
            if from_task is not None and from_task not in case_vars:
                raise self.fail(at, f"no task case defines {from_task!r}", "from_task")
            if dim_id is not None:
                owner[dim_id] = name
            # allowed values of a personal slot are its dimension's value ids, so gold is always allowed
            values = tuple(dims[dim_id].value_ids) if dim_id else tuple(str(v) for v in s.get("values") or [])
            description = str(s.get("description") or ("set by the task" if from_task else ""))
            slots.append(Slot(name, str(s.get("type", "string")), values, dim_id, from_task, description))
        missing = sorted(set(dims) - set(owner))
        if missing:
            raise self.fail(where, f"every dimension needs a slot; missing {missing}", "slots")
        return ApiTemplate(self.ident(raw, "name", where), str(raw.get("description", "")), tuple(slots))

    def scenario(self, raw: dict[str, Any], domain: str, where: str) -> Scenario:
        name = self.ident(raw, "name", where)
        where = _label(where, "scenario", name)
        action = self.need(raw, "action_type", where)
        if action not in ("generate", "call_api"):
            raise self.fail(where, f"action_type must be generate or call_api, not {action!r}", "action_type")
        dynamic = raw.get("dynamic", False)
        if not isinstance(dynamic, bool):
            raise self.fail(where, f"dynamic must be true or false, not {dynamic!r}", "dynamic")
        instances = raw.get("instances")
        if instances is not None and (isinstance(instances, bool) or not isinstance(instances, int) or instances < 1):
            raise self.fail(where, f"instances must be a positive integer, not {instances!r}", "instances")
        dims = tuple(self.dimension(d, f"{where}.dimensions[{i}]", dynamic)
                     for i, d in enumerate(self.items(raw, "dimensions", where)))
        dim_ids = [d.id for d in dims]
        dup = sorted({i for i in dim_ids if dim_ids.count(i) > 1})
        if dup:
            raise self.fail(where, f"dimension ids must be distinct; repeated: {dup}", "dimensions")
        if dynamic and not any(d.shifts for d in dims):
            raise self.fail(where, "is dynamic but no dimension declares shifts", "dynamic")
        cases = []
        for i, c in enumerate(self.items(raw, "cases", where)):
            if not isinstance(c, dict) or not c:
                raise self.fail(f"{where}.cases[{i}]", "a case must be a non-empty mapping of task variables", "cases")
            cases.append(dict(c))
        case_vars = set.intersection(*(set(c) for c in cases))
        tasks = tuple(str(t) for t in self.items(raw, "tasks", where))
        for i, t in enumerate(tasks):
            unknown = sorted(set(_TEMPLATE_FIELD.findall(t)) - case_vars)
            if unknown:
                raise self.fail(f"{where}.tasks[{i}]", f"uses {unknown}, which not every case defines", "tasks")
        api = None
        if action == "call_api":
            api = self.api(self.need(raw, "api", where), {d.id: d for d in dims}, case_vars, where)
        elif raw.get("api") is not None:
            raise self.fail(where, "only call_api scenarios take an api template", "api")
        return Scenario(domain, name, action, dynamic, dims, tasks, tuple(cases), api, instances)


def parse_taxonomy(data: dict[str, Any], path: Path) -> Taxonomy:
    reader = _Reader(path)
    scenarios: list[Scenario] = []
    first_at: dict[str, str] = {}
    for di, d in enumerate(reader.items(data, "domains", "top level")):
        dwhere = f"domains[{di}]"
        domain = reader.ident(d, "name", dwhere)
        dwhere = _label(dwhere, "domain", domain)
        for si, raw in enumerate(reader.items(d, "scenarios", dwhere)):
            at = f"domains[{di}].scenarios[{si}]"
            scenario = reader.scenario(raw, domain, at)
            if scenario.name in first_at:
                raise reader.fail(_label(at, "scenario", scenario.name),
                                  f"duplicate scenario name; first defined at {first_at[scenario.name]}", "name")
            first_at[scenario.name] = at
            scenarios.append(scenario)
    return Taxonomy(tuple(scenarios), str(path))


@lru_cache(maxsize=4)
def _load(path: str) -> Taxonomy:
    p = Path(path)
    return parse_taxonomy(read_yaml_file(p), p)  # a bad file: one line naming it and the line


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """The scenario taxonomy (cached per path): the bundled scenarios.yaml by default."""
    return _load(str(Path(path) if path else DEFAULT_PATH))
