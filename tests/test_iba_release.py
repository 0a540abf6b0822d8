"""The IBA-Bench release loader: layout round trip (JSONL, Parquet) and precise errors."""
from __future__ import annotations

import json
from dataclasses import asdict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perseval.benchmarks.iba.benchmark import IbaBenchmark
from perseval.benchmarks.iba.release import IBA_LAYOUT, write_release
from perseval.core.errors import InputError
from .conftest import minimal


def constructed():
    return IbaBenchmark({"noise_per_evidence": 3, "distribution": "table2", "dynamic_rate": 0.6}).build(
        sample=12, seed=4, source=None)


def by_id(instances):
    return {i.instance_id: asdict(i) for i in instances}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_release_round_trip_gives_back_the_constructed_data(tmp_path, fmt):
    data = constructed()
    got = IBA_LAYOUT.load(write_release(data, tmp_path, fmt))
    assert by_id(got.instances) == by_id(data.instances)
    assert {d.doc_id: asdict(d) for d in got.documents} == {d.doc_id: asdict(d) for d in data.documents}
    assert got.info["n_instances"] == 12 and got.info["source"] == str(tmp_path)


def test_benchmark_build_reads_a_release_folder(tmp_path):
    data = constructed()
    write_release(data, tmp_path)
    got = IbaBenchmark().build(sample=12, seed=0, source=tmp_path)  # the release's size: all of it
    assert by_id(got.instances) == by_id(data.instances)


def test_parquet_with_native_nested_columns(tmp_path):
    data = constructed()
    write_release(data, tmp_path, "jsonl")
    for stem in ("instances", "histories"):
        rows = [json.loads(line) for line in (tmp_path / f"{stem}.jsonl").read_text().splitlines()]
        (tmp_path / f"{stem}.jsonl").unlink()
        if stem == "instances":  # mixed: one nested field as JSON text, the others native
            for r in rows:
                r["preferences"] = json.dumps(r["preferences"])
        names = list(dict.fromkeys(k for r in rows for k in r))  # from_pylist reads keys off the first row
        pq.write_table(pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows]),
                       tmp_path / f"{stem}.parquet")
    got = IBA_LAYOUT.load(tmp_path)
    assert by_id(got.instances) == by_id(data.instances)


# --- errors ---------------------------------------------------------------------------------


def test_a_minimal_release_loads(tmp_path):
    got = IBA_LAYOUT.load(minimal(tmp_path))
    inst = got.instances[0]
    assert inst.payload["action_type"] == "call_api" and inst.payload["n_evidence"] == 2
    assert inst.payload["dynamic"] and inst.gold["n_dynamic"] == 1 and inst.gold["slots"] == {"spice_level": "hot"}
    docs = got.documents
    assert [d.doc_id for d in docs] == ["u1-t00000", "u1-t00001", "u1-t00002"]
    assert docs[0].text == "User: Mild please.\nAssistant: Sure." and docs[1].meta == {"kind": "noise"}
    assert docs[2].meta["dynamic_phase"] == "new" and docs[2].meta["evidence_type"] == "explicit_revision"


@pytest.mark.parametrize("override, match", [
    ({"query": None}, r"instances.jsonl, row 1, field 'query': missing; expected a string"),
    ({"action_type": "Click"}, r"field 'action_type': unknown value 'Click'"),
    ({"gold_slots": {"spice": "hot"}}, r"field 'gold_slots.spice': names no slot of the API"),
    ({"gold_slots": {"restaurant": "x"}}, r"field 'gold_slots.restaurant': is task-fixed"),
    ({"gold_slots": {"spice_level": "volcanic"}}, r"'gold_slots.spice_level': value 'volcanic' is not among"),
    ({"api": None}, r"field 'api': missing; expected an object"),
    ({"api": {"name": "x", "slots": [{"type": "string"}]}}, r"field 'api.slots\[0\].name': missing"),
    ({"preferences": []}, r"field 'preferences': empty list"),
    ({"preferences": [{"dimension": "spice_level"}]}, r"field 'preferences\[0\].value': missing"),
    ({"action_type": "generate"}, r"field 'checkpoints': missing; expected a list"),
    ({"user_id": "nobody"}, r"field 'user_id': user 'nobody' has no turns in histories.jsonl"),
    ({"n_constraints": "three"}, r"field 'n_constraints': expected an integer"),
    ({"preferences": "[{oops"}, r"field 'preferences': a string that is not valid JSON"),
])
def test_instance_errors_name_row_and_field(tmp_path, override, match):
    with pytest.raises(InputError, match=match):
        IBA_LAYOUT.load(minimal(tmp_path, override))


def test_duplicate_ids_and_bad_json_lines(tmp_path):
    row = json.loads(minimal(tmp_path).joinpath("instances.jsonl").read_text())
    with pytest.raises(InputError, match=r"row 2, field 'instance_id': duplicate instance_id 'a1' \(first at row 1\)"):
        IBA_LAYOUT.load(minimal(tmp_path, raw_instances=json.dumps(row) + "\n" + json.dumps(row) + "\n"))
    with pytest.raises(InputError, match=r"instances.jsonl, row 2: not valid JSON"):
        IBA_LAYOUT.load(minimal(tmp_path, raw_instances=json.dumps(row) + "\n{broken\n"))
    with pytest.raises(InputError, match=r"row 1: expected a JSON object per line"):
        IBA_LAYOUT.load(minimal(tmp_path, raw_instances="[1, 2]\n"))
    with pytest.raises(InputError, match="no instance rows"):
        IBA_LAYOUT.load(minimal(tmp_path, raw_instances="\n"))


@pytest.mark.parametrize("turn, match", [
    ({"user_id": "u1", "timestamp": "03/01/2025", "text": "x"},
     r"row 1, field 'timestamp': '03/01/2025' is not an ISO 8601"),
    ({"user_id": "u1", "timestamp": "2025-03-01T09:00:00"}, r"field 'text': give either `text`"),
    ({"user_id": "u1", "timestamp": "2025-03-01T09:00:00", "text": "a", "user": "b"}, r"not both"),
    ({"timestamp": "2025-03-01T09:00:00", "text": "a"}, r"field 'user_id': missing"),
    ({"user_id": "u1", "timestamp": "2025-03-01T09:00:00", "text": "a", "evidence": [{"dimension": "d", "value": "v",
                                                                                      "phase": "later"}]},
     r"field 'evidence\[0\].phase': unknown value 'later'"),
    ({"user_id": "u1", "timestamp": "2025-03-01T09:00:00", "text": "a", "evidence": [{"value": "v"}]},
     r"field 'evidence\[0\].dimension': missing"),
])
def test_history_errors_name_row_and_field(tmp_path, turn, match):
    with pytest.raises(InputError, match=match):
        IBA_LAYOUT.load(minimal(tmp_path, turns=[turn]))


def test_duplicate_turn_ids(tmp_path):
    t = {"user_id": "u1", "timestamp": "2025-03-01T09:00:00", "text": "a", "turn_id": "t1"}
    with pytest.raises(InputError, match=r"histories.jsonl, row 2, field 'turn_id': duplicate turn_id 't1'"):
        IBA_LAYOUT.load(minimal(tmp_path, turns=[t, t]))


def test_missing_or_doubled_files_say_what_is_expected(tmp_path):
    with pytest.raises(InputError, match=r"missing file instances.jsonl \(or instances.parquet\).*not public yet"):
        IBA_LAYOUT.load(tmp_path)
    with pytest.raises(InputError, match="not a folder"):
        IBA_LAYOUT.load(tmp_path / "nope")
    minimal(tmp_path)
    (tmp_path / "histories.parquet").write_bytes(b"")
    with pytest.raises(InputError, match="both histories.jsonl and histories.parquet exist"):
        IBA_LAYOUT.load(tmp_path)
    (tmp_path / "histories.jsonl").unlink()
    with pytest.raises(InputError, match=r"histories.parquet: cannot read as Parquet"):
        IBA_LAYOUT.load(tmp_path)
