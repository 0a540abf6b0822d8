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
