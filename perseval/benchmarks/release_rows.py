"""Field-level checks of a release's rows (IBA-Bench's release, a user's own data), and their mapping onto
perseval's records: typed getters that name file, row and field; the checkpoints, API call and gold slots of an
instance row; a history turn with its evidence tags. Each layout's own instance row is its benchmark's
(perseval.benchmarks.iba.release, perseval.benchmarks.custom.rows); the folder is read by
perseval.benchmarks.release_folder.

Nested fields may be native (JSON Lines, Parquet struct/list columns) or JSON
text (a Parquet string column); both are accepted. A field path in an error
uses dots and indexes, e.g. `api.slots[2].name`.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, Iterable

from perseval.benchmarks.evidence_kinds import SALIENCE_CAP, TABLE12
from perseval.core import files
from perseval.core.errors import InputError
from perseval.core.instances import Document

PHASES = ("static", "old", "new")
UNSPECIFIED = "unspecified"  # an evidence signal whose release gives no kind


@dataclass
class Rows:
    """One raw row and where it came from, with typed getters that fail precisely."""

    path: Path
    n: int
    raw: dict[str, Any]

    def fail(self, field: str, message: str) -> InputError:
        return InputError(self.path, message, row=self.n, field=field)

    def get(self, obj: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...], required: bool) -> Any:
        value = obj.get(key) if isinstance(obj, dict) else None
        if isinstance(value, str) and kind in (list, dict):
            value = self._decode(value, where)
        if isinstance(value, float) and math.isnan(value):
            value = None  # pandas writes a missing value of a numeric column as NaN
        if value is None or (value == "" and kind is str):
            if required:
                raise self.fail(where, f"missing; expected {_kind_name(kind)}")
            return None
        if isinstance(value, dict):
            # a Parquet struct column has every key any row has, null where a row lacks it
            value = {k: v for k, v in value.items() if v is not None}
        if kind is int and isinstance(value, float):
            # pandas writes an integer column with missing values as float: 1.0 is 1, 1.5 no count
            if not value.is_integer():
                raise self.fail(where, f"expected an integer, got float {value!r}")
            value = int(value)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            hint = f' (write it as text: "{value}")' if kind is str and isinstance(value, (int, float)) else ""
            raise self.fail(where, f"expected {_kind_name(kind)}, got {type(value).__name__} {value!r:.80}{hint}")
        return value

    def _decode(self, text: str, where: str) -> Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise self.fail(where, f"a string that is not valid JSON ({files.json_problem(exc)})") from None

    def need(self, key: str, kind: type | tuple[type, ...] = str, obj: dict | None = None, where: str = "") -> Any:
        return self.get(self.raw if obj is None else obj, key, where or key, kind, True)

    def opt(self, key: str, kind: type | tuple[type, ...] = str, obj: dict | None = None, where: str = "") -> Any:
        return self.get(self.raw if obj is None else obj, key, where or key, kind, False)

    def items(self, key: str, obj: dict | None = None, where: str = "", required: bool = True) -> list[dict]:
        """A list of objects, non-empty when required."""
        where = where or key
        value = self.need(key, list, obj, where) if required else (self.opt(key, list, obj, where) or [])
        if required and not value:
            raise self.fail(where, "empty list; expected at least one object")
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.fail(f"{where}[{i}]", f"expected an object, got {type(item).__name__}")
        return value


def sub_field(r: Rows, obj: dict[str, Any], prefix: str, key: str, kind: type = str, required: bool = False) -> Any:
    """A field of a nested object, named `<prefix>.<key>` in errors."""
    return (r.need if required else r.opt)(key, kind, obj, f"{prefix}.{key}")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", list: "a list", dict: "an object", bool: "true/false"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


# --- the scored parts of an instance row ------------------------------------------------


def checkpoints_of(r: Rows) -> list[dict[str, Any]]:
    """A free-text instance's hidden checkpoints: a statement each, with its id, dimension and value."""
    out = []
    for i, c in enumerate(r.items("checkpoints")):
        w = f"checkpoints[{i}]"
        dim = sub_field(r, c, w, "dimension")
        out.append({"id": sub_field(r, c, w, "id") or dim or f"c{i}", "dimension": dim,
                    "value": sub_field(r, c, w, "value"), "statement": sub_field(r, c, w, "statement", required=True)})
    return out


def api_of(r: Rows) -> dict[str, Any]:
    """An API-call instance's API: its name, slots (with their allowed values) and the task-fixed values."""
    api = r.need("api", dict)
    slots = []
    for i, s in enumerate(r.items("slots", api, "api.slots")):
        w = f"api.slots[{i}]"
        values = sub_field(r, s, w, "values", list) or []
        slots.append({"name": sub_field(r, s, w, "name", required=True),
                      "type": sub_field(r, s, w, "type") or "string", "values": [str(v) for v in values],
                      "description": sub_field(r, s, w, "description") or ""})
    names = [s["name"] for s in slots]
    fixed = r.opt("task_fixed", dict, api, "api.task_fixed") or {}
    for name in fixed:
        if name not in names:
            raise r.fail(f"api.task_fixed.{name}", f"names no slot of the API; slots: {names}")
    return {"name": sub_field(r, api, "api", "name", required=True),
            "description": sub_field(r, api, "api", "description") or "", "slots": slots, "task_fixed": fixed}


def gold_slots_of(r: Rows, api: dict[str, Any]) -> dict[str, Any]:
    """An API call's gold: a value for each personalization-relevant (not task-fixed) slot, among its values."""
    gold = r.need("gold_slots", dict)
    if not gold:
        raise r.fail("gold_slots", "empty; expected at least one personalization-relevant slot")
    by_name = {s["name"]: s for s in api["slots"]}
    for name, value in gold.items():
        if name not in by_name:
            raise r.fail(f"gold_slots.{name}", f"names no slot of the API; slots: {sorted(by_name)}")
        if name in api["task_fixed"]:
            raise r.fail(f"gold_slots.{name}", "is task-fixed; only personalization-relevant slots are scored")
        allowed = by_name[name]["values"]
        if allowed and str(value) not in allowed:
            raise r.fail(f"gold_slots.{name}", f"value {value!r} is not among the slot's values {allowed}")
    return gold


# --- histories -----------------------------------------------------------------------------


@dataclass
class HistoryRow:
    doc: Document


def _text(r: Rows) -> str:
    text, user = r.opt("text"), r.opt("user")
    if (text is None) == (user is None):
        raise r.fail("text", "give either `text` (the whole exchange) or `user` (and optionally `assistant`)"
                     if text is None else "give `text` or `user`/`assistant`, not both")
    if text is not None:
        return text
    assistant = r.opt("assistant")
    return f"User: {user}" + (f"\nAssistant: {assistant}" if assistant else "")


def _timestamp(r: Rows) -> str:
    """ISO 8601 text, or a native Parquet timestamp/date column (what pandas and pyarrow write); a date alone is
    midnight of that day. Stored as ISO 8601 text (a date-time; its zone kept when given)."""
    value = r.raw.get("timestamp")
    if isinstance(value, datetime):  # a timestamp column (pandas.Timestamp is a datetime)
        return value.isoformat()
    if isinstance(value, date):  # a date32 column
        return datetime.combine(value, time()).isoformat()
    stamp = r.need("timestamp")
    try:
        parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        raise r.fail("timestamp", f"{stamp!r} is not an ISO 8601 date-time or date (e.g. 2025-03-01T09:30:00 "
                                  "or 2025-03-01)") from None
    return parsed.isoformat() if len(stamp.strip()) == 10 else stamp


def _choice(r: Rows, e: dict[str, Any], where: str, key: str, allowed: Iterable[str]) -> str | None:
    """An optional string field that must be one of `allowed` when given."""
    value = r.opt(key, str, e, f"{where}.{key}")
    if value is not None and value not in allowed:
        raise r.fail(f"{where}.{key}", f"unknown value {value!r}; expected one of {list(allowed)}")
    return value


def _support(r: Rows, e: dict[str, Any], where: str) -> dict[str, Any]:
    phase = _choice(r, e, where, "phase", PHASES) or "static"
    # a kind outside Table 12's five is an error, not a signal silently weighed as nothing
    kind = _choice(r, e, where, "kind", TABLE12) or UNSPECIFIED
    category, low, high = TABLE12.get(kind, (UNSPECIFIED, 0, 0))
    return {"dimension": sub_field(r, e, where, "dimension", required=True),
            "value": sub_field(r, e, where, "value", required=True), "kind": kind, "dynamic_phase": phase,
            "evidence_type": category, "salience": high if phase == "new" else low}


def _meta(r: Rows) -> dict[str, Any]:
    evidence = r.items("evidence", required=False)
    if not evidence:
        return {"kind": "noise"}
    supports = [_support(r, e, f"evidence[{i}]") for i, e in enumerate(evidence)]
    return {"scenario": r.opt("scenario") or "", **supports[0],
            "salience": min(SALIENCE_CAP, sum(s["salience"] for s in supports)), "supports": supports}


def history_row(r: Rows, index_in_user: int) -> HistoryRow:
    user = r.need("user_id")
    turn_id = r.opt("turn_id") or f"{user}-t{index_in_user:05d}"
    return HistoryRow(Document(owner=user, doc_id=turn_id, text=_text(r), timestamp=_timestamp(r), meta=_meta(r)))
