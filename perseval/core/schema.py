"""Arrow schemas of every table the pipeline writes, and record <-> table conversion.

Dict- and list-valued fields are stored as JSON text so that all benchmarks
share one schema per stage and Parquet files stay readable by any tool.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, fields
from typing import Any, TypeVar

import pyarrow as pa

from perseval.core.instances import AgentOutput, Document, Instance, InstanceScore, Judgment

INSTANCES = pa.schema([
    ("instance_id", pa.string()), ("benchmark", pa.string()), ("user_id", pa.string()),
    ("group", pa.string()), ("query", pa.string()), ("payload", pa.string()), ("gold", pa.string()),
])
DOCUMENTS = pa.schema([
    ("owner", pa.string()), ("doc_id", pa.string()), ("text", pa.string()),
    ("timestamp", pa.string()), ("meta", pa.string()),
])
CHUNKS = pa.schema([
    ("owner", pa.string()), ("doc_id", pa.string()), ("chunk_id", pa.int32()),
    ("text", pa.string()), ("row", pa.int64()),
])
OUTPUTS = pa.schema([
    ("instance_id", pa.string()), ("agent", pa.string()), ("repeat", pa.int32()),
    ("text", pa.string()), ("parsed", pa.string()), ("status", pa.string()), ("error", pa.string()),
    ("trace", pa.string()), ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
    ("requests", pa.string()),
])
JUDGMENTS = pa.schema([
    ("instance_id", pa.string()), ("agent", pa.string()), ("repeat", pa.int32()),
    ("judge", pa.string()), ("judge_repeat", pa.int32()), ("item_id", pa.string()),
    ("kind", pa.string()), ("score", pa.float64()), ("status", pa.string()),
    ("raw", pa.string()), ("feedback", pa.string()), ("prompt", pa.string()), ("p_true", pa.float64()),
    ("method", pa.string()),
])
SCORES = pa.schema([
    ("instance_id", pa.string()), ("agent", pa.string()), ("repeat", pa.int32()),
    ("judge", pa.string()), ("judge_repeat", pa.int32()), ("group", pa.string()),
    ("metric", pa.string()), ("value", pa.float64()), ("n_items", pa.int64()), ("n_unscored", pa.int64()),
    ("user_id", pa.string()),
])

SCHEMAS: dict[type, pa.Schema] = {
    Instance: INSTANCES, Document: DOCUMENTS, AgentOutput: OUTPUTS, Judgment: JUDGMENTS, InstanceScore: SCORES,
}
JSON_FIELDS = {"payload", "gold", "meta", "parsed", "trace", "prompt", "requests"}

R = TypeVar("R")


def _encode(name: str, value: Any) -> Any:
    if name in JSON_FIELDS:
        return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return value


def _decode(name: str, value: Any) -> Any:
    if name in JSON_FIELDS:
        return None if value is None else json.loads(value)
    return value


def to_table(records: list[Any], cls: type) -> pa.Table:
    """Records of one dataclass type -> an Arrow table with that type's schema."""
    schema = SCHEMAS[cls]
    names = [f.name for f in fields(cls)]
    columns = {n: [_encode(n, getattr(r, n)) for r in records] for n in names}
    return pa.table(columns, schema=schema)


def from_table(table: pa.Table, cls: type[R]) -> list[R]:
    """An Arrow table -> records of `cls` (JSON columns decoded). A column a field with a default was added
    after the table was written (a judgment's prompt) is left to that default, so earlier outputs still read."""
    names = [f.name for f in fields(cls) if f.name in table.column_names
             or (f.default is MISSING and f.default_factory is MISSING)]
    rows = table.select(names).to_pylist()
    return [cls(**{n: _decode(n, row[n]) for n in names}) for row in rows]
