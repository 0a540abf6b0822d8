"""The IBA-Bench scenario taxonomy: domain -> scenario -> dimension -> values.

Loaded from `scenarios.yaml` (package data) and validated once; a bad file
raises InputError naming the scenario and field, so a later edit that adds
scenarios fails at load time rather than during construction.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml

from perseval.errors import InputError

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

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    def dimension(self, dim_id: str) -> Dimension:
        for d in self.dimensions:
            if d.id == dim_id:
                return d
        raise KeyError(f"scenario {self.name!r} has no dimension {dim_id!r}")


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


# --- loading and validation -------------------------------------------------


class _Reader:
    """Parses the YAML mapping while keeping the path for error messages."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, message: str, field_name: str | None = None) -> InputError:
        return InputError(self.path, f"{where}: {message}", field=field_name)

    def need(self, obj: dict[str, Any], key: str, where: str) -> Any:
        if not isinstance(obj, dict) or key not in obj or obj[key] in (None, "", []):
            raise self.fail(where, "missing or empty", key)
        return obj[key]

    def value(self, raw: dict[str, Any], where: str) -> Value:
        vid = str(self.need(raw, "id", where))
        where = f"{where} value {vid!r}"
        evidence_raw = self.need(raw, "evidence", where)
        unknown = set(evidence_raw) - set(EVIDENCE_KINDS)
        if unknown:
            raise self.fail(where, f"unknown evidence kinds {sorted(unknown)}", "evidence")
        evidence = {k: tuple(str(t) for t in texts) for k, texts in evidence_raw.items() if texts}
        return Value(vid, str(self.need(raw, "label", where)), str(self.need(raw, "checkpoint", where)), evidence)

    def dimension(self, raw: dict[str, Any], where: str, dynamic_ok: bool) -> Dimension:
        did = str(self.need(raw, "id", where))
        where = f"{where} dimension {did!r}"
        values = tuple(self.value(v, where) for v in self.need(raw, "values", where))
        ids = [v.id for v in values]
        if len(values) < 2 or len(set(ids)) != len(ids):
            raise self.fail(where, "needs at least two distinct value ids", "values")
        shifts = tuple((str(a), str(b)) for a, b in raw.get("shifts") or [])
        for a, b in shifts:
            if a not in ids or b not in ids or a == b:
                raise self.fail(where, f"shift {[a, b]} must name two different values of {ids}", "shifts")
        if shifts and not dynamic_ok:
            raise self.fail(where, "has shifts but its scenario is not dynamic", "shifts")
        return Dimension(did, str(raw.get("name", did)), values, shifts)

    def api(self, raw: dict[str, Any], dims: dict[str, Dimension], case_vars: set[str], where: str) -> ApiTemplate:
        slots = []
        for s in self.need(raw, "slots", where):
            name = str(self.need(s, "name", where))
            dim_id, from_task = s.get("dimension"), s.get("from_task")
            if (dim_id is None) == (from_task is None):
                raise self.fail(f"{where} slot {name!r}", "needs exactly one of `dimension` or `from_task`")
            if dim_id is not None and dim_id not in dims:
                raise self.fail(f"{where} slot {name!r}", f"unknown dimension {dim_id!r}", "dimension")
            if from_task is not None and from_task not in case_vars:
                raise self.fail(f"{where} slot {name!r}", f"no task case defines {from_task!r}", "from_task")
            # allowed values of a personal slot are its dimension's value ids, so gold is always allowed
            values = tuple(dims[dim_id].value_ids) if dim_id else tuple(str(v) for v in s.get("values") or [])
            description = str(s.get("description") or ("set by the task" if from_task else ""))
            slots.append(Slot(name, str(s.get("type", "string")), values, dim_id, from_task, description))
        covered = {s.dimension for s in slots if s.dimension}
        if covered != set(dims):
            raise self.fail(where, f"every dimension needs a slot; missing {sorted(set(dims) - covered)}", "slots")
        return ApiTemplate(str(self.need(raw, "name", where)), str(raw.get("description", "")), tuple(slots))

    def scenario(self, raw: dict[str, Any], domain: str) -> Scenario:
        name = str(self.need(raw, "name", f"domain {domain!r}"))
        where = f"scenario {name!r}"
        action = self.need(raw, "action_type", where)
        if action not in ("generate", "call_api"):
            raise self.fail(where, f"action_type must be generate or call_api, not {action!r}", "action_type")
        dynamic = bool(raw.get("dynamic", False))
        dims = tuple(self.dimension(d, where, dynamic) for d in self.need(raw, "dimensions", where))
        cases = tuple(dict(c) for c in self.need(raw, "cases", where))
        case_vars = set.intersection(*(set(c) for c in cases))
        api = None
        if action == "call_api":
            api = self.api(self.need(raw, "api", where), {d.id: d for d in dims}, case_vars, where)
        return Scenario(domain, name, action, dynamic, dims, tuple(self.need(raw, "tasks", where)), cases, api)


def parse_taxonomy(data: dict[str, Any], path: Path) -> Taxonomy:
    reader = _Reader(path)
    scenarios = [reader.scenario(s, str(d["name"])) for d in reader.need(data, "domains", "top level")
                 for s in reader.need(d, "scenarios", f"domain {d.get('name')!r}")]
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise reader.fail("top level", "scenario names must be unique", "name")
    return Taxonomy(tuple(scenarios), str(path))


@lru_cache(maxsize=4)
def _load(path: str) -> Taxonomy:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(p, f"cannot read the scenario taxonomy: {exc}") from exc
    return parse_taxonomy(data, p)


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """The scenario taxonomy (cached per path): the bundled scenarios.yaml by default."""
    return _load(str(Path(path) if path else DEFAULT_PATH))
