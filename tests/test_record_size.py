"""A record of any size round-trips exactly: above INLINE_INSTANCES its instances go to instances.parquet, and
every missing value (a trace id, a score, a rationale-less verdict) reads back as None, not NaN."""
from __future__ import annotations

from perseval.report.record import INLINE_INSTANCES, INSTANCES, ExperimentRef, make_record, read_record, write_record
from tests.record_helpers import many_instances


def test_a_record_of_5000_instances_with_missing_trace_ids_reads_back_equal(tmp_path):
    instances = many_instances(5000)
    assert len(instances) > INLINE_INSTANCES
    record = make_record("run1", ExperimentRef(name="e", file="e.yaml", settings_digest="d", mlflow_experiment="m"),
                         [], instances, None)
    folder = write_record(record, tmp_path)
    assert (folder / INSTANCES).is_file()
    back = read_record(folder)
    assert back.instances == instances  # None stays None: trace ids, scores, verdict scores
    assert sum(i.trace_id is None for i in back.instances) == sum(i.trace_id is None for i in instances) > 3000


def test_the_digest_hashed_an_instance_at_a_time_is_the_digest_of_the_whole_record_encoded_at_once():
    """results_digest streams its bytes (a 20,000-instance record is never one string) and still equals the
    hash of json.dumps of the whole body, as records written before carry it; a trace id never enters it."""
    import dataclasses
    import hashlib
    import json

    from perseval.report.record import results_digest
    from tests.record_helpers import cell
    cells, instances = [cell("b", "a", "j", 50.0, 40.0, 60.0, 12)], many_instances(300)
    body = {"cells": [c.model_dump(include={"key", "metric", "status", "estimate", "difference", "probe",
                                             "controls", "attribution"}) for c in cells],
            "instances": [{k: v for k, v in dataclasses.asdict(i).items() if k != "trace_id"} for i in instances]}
    whole = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert results_digest(cells, instances) == whole
    retraced = [dataclasses.replace(i, trace_id="tr-other") for i in instances]
    assert results_digest(cells, retraced) == whole
    rescored = [dataclasses.replace(instances[0], score=7.0), *instances[1:]]
    assert results_digest(cells, rescored) != whole


def test_a_record_row_is_slotted_and_validated():
    """Instances and verdicts are slotted dataclasses (a record holds one per instance and cell), validated as
    a model would be: a wrong type or an unknown field is refused."""
    import pydantic
    import pytest

    from perseval.report.record import InstanceRecord, Verdict
    row = many_instances(1)[0]
    assert not hasattr(row, "__dict__")
    with pytest.raises(pydantic.ValidationError):
        Verdict(kind="k", item_id="i", judge_repeat="not a number", score=None, status="s", rationale="")
    with pytest.raises(pydantic.ValidationError):
        InstanceRecord.__pydantic_validator__.validate_python({**{f: getattr(row, f) for f in
                                                               row.__dataclass_fields__}, "extra": 1})


def test_a_killed_tracks_samples_parts_are_swept_and_a_live_ones_kept(tmp_path):
    """The track stage writes each cell's samples lines in a scratch folder named after its process: a folder
    left by a process that is gone (a track killed mid-way) is removed by the next track, one of a live
    process (another run's track) is not."""
    import os
    import subprocess
    import sys

    from perseval.report.sink.track import PARTS_PREFIX, samples_parts
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f"{PARTS_PREFIX}{gone.stdout.strip()}-abc"
    live = tmp_path / f"{PARTS_PREFIX}{os.getppid()}-def"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "cell.jsonl").write_text("{}\n")
    mine = samples_parts(tmp_path)
    assert not dead.exists() and live.exists()
    assert mine.is_dir() and mine.name.startswith(f"{PARTS_PREFIX}{os.getpid()}-")
