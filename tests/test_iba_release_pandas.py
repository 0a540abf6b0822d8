"""The IBA release loader reads what pandas and pyarrow write (issue 22), and refuses what the layout does not
say (issues 22 and 24): native timestamp and date columns, nullable integers written as float, date-only
timestamps; a number where text is expected, n_constraints 0 and an unknown domain are errors naming file,
row and field."""
from __future__ import annotations

import json
from datetime import date

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perseval.benchmarks.iba.release import DOMAINS, IBA_LAYOUT
from perseval.core.errors import InputError
from tests.conftest import minimal


def to_parquet(tmp_path, stem: str, frame: pd.DataFrame) -> None:
    (tmp_path / f"{stem}.jsonl").unlink()
    frame.to_parquet(tmp_path / f"{stem}.parquet", index=False)


def turns_frame(tmp_path) -> pd.DataFrame:
    rows = [json.loads(line) for line in (tmp_path / "histories.jsonl").read_text().splitlines()]
    frame = pd.DataFrame(rows)
    frame["evidence"] = frame["evidence"].map(lambda e: json.dumps(e) if isinstance(e, list) else None)
    return frame


def test_a_native_parquet_timestamp_column_written_by_pandas_is_read(tmp_path):
    minimal(tmp_path)
    frame = turns_frame(tmp_path)
    frame["timestamp"] = pd.to_datetime(frame["timestamp"])
    to_parquet(tmp_path, "histories", frame)
    assert pa.types.is_timestamp(pq.read_schema(tmp_path / "histories.parquet").field("timestamp").type)
    docs = IBA_LAYOUT.load(tmp_path).documents
    assert [d.timestamp for d in docs] == ["2025-03-01T09:00:00", "2025-03-02T09:00:00", "2025-03-03T09:00:00"]


def test_a_zoned_timestamp_column_and_a_date_column_are_read(tmp_path):
    minimal(tmp_path)
    frame = turns_frame(tmp_path)
    frame["timestamp"] = pd.to_datetime(frame["timestamp"]).dt.tz_localize("Europe/Paris")
    to_parquet(tmp_path, "histories", frame)
    assert IBA_LAYOUT.load(tmp_path).documents[0].timestamp == "2025-03-01T09:00:00+01:00"
    table = pq.read_table(tmp_path / "histories.parquet")
    dates = pa.array([date(2025, 3, 1), date(2025, 3, 2), date(2025, 3, 3)], pa.date32())
    pq.write_table(table.set_column(table.schema.get_field_index("timestamp"), "timestamp", dates),
                   tmp_path / "histories.parquet")
    assert IBA_LAYOUT.load(tmp_path).documents[2].timestamp == "2025-03-03T00:00:00"


def test_a_date_only_timestamp_is_midnight_of_that_day(tmp_path):
    turns = [{"user_id": "u1", "timestamp": "2025-01-06", "text": "User: hot please"},
             {"user_id": "u1", "timestamp": "2025-01-05T23:00:00", "text": "User: earlier"}]
    docs = IBA_LAYOUT.load(minimal(tmp_path, turns=turns)).documents
    assert [(d.text, d.timestamp) for d in docs] == [("User: earlier", "2025-01-05T23:00:00"),
                                                     ("User: hot please", "2025-01-06T00:00:00")]


def test_a_nullable_integer_column_pandas_wrote_as_float_is_read(tmp_path):
    minimal(tmp_path)
    rows = [json.loads((tmp_path / "instances.jsonl").read_text())]
    rows.append({**rows[0], "instance_id": "a2"})
    frame = pd.DataFrame(rows)
    frame["n_evidence"] = [1, None]  # pandas: float64 with NaN
    for col in ("preferences", "api", "gold_slots"):
        frame[col] = frame[col].map(json.dumps)
    to_parquet(tmp_path, "instances", frame)
    assert pq.read_schema(tmp_path / "instances.parquet").field("n_evidence").type == pa.float64()
    a1, a2 = IBA_LAYOUT.load(tmp_path).instances
    assert a1.payload["n_evidence"] == 1 and type(a1.payload["n_evidence"]) is int
    assert a2.payload["n_evidence"] == 2  # NaN is absent: derived from the history's evidence turns
    frame["n_evidence"] = [1.5, None]
    frame.to_parquet(tmp_path / "instances.parquet", index=False)
    with pytest.raises(InputError, match=r"instances.parquet, row 1, field 'n_evidence': expected an integer, "
                                         r"got float 1.5"):
        IBA_LAYOUT.load(tmp_path)


@pytest.mark.parametrize("override, match", [
    ({"preferences": [{"dimension": "spice_level", "value": 5}]},
     r"instances.jsonl, row 1, field 'preferences\[0\].value': expected a string, got int 5 \(write it as text"),
    ({"query": 3.5}, r"field 'query': expected a string, got float 3.5"),
    ({"n_constraints": 0}, r"field 'n_constraints': 0, but the instance has 1 preference\(s\); expected 1 or more"),
    ({"domain": "Cooking"}, r"field 'domain': unknown domain 'Cooking'; expected one of Table 2's: \['Writing and"),
])
def test_what_the_layout_does_not_say_is_an_error(tmp_path, override, match):
    with pytest.raises(InputError, match=match):
        IBA_LAYOUT.load(minimal(tmp_path, override))


def test_n_constraints_is_honoured_and_a_domain_is_spelt_as_table2(tmp_path):
    inst = IBA_LAYOUT.load(minimal(tmp_path, {"n_constraints": 3, "domain": "daily  consumption"})).instances[0]
    assert inst.payload["n_constraints"] == 3 and inst.group == "Daily Consumption"
    assert len(DOMAINS) == 9 and "Overall" not in DOMAINS
