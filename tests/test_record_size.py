"""A record of any size round-trips exactly: above INLINE_INSTANCES its instances go to instances.parquet, and
every missing value (a trace id, a score, a rationale-less verdict) reads back as None, not NaN."""
from __future__ import annotations

from perseval.report.record import (INLINE_INSTANCES, INSTANCES, ExperimentRef, InstanceRecord, Verdict, make_record,
                                    read_record, write_record)


def _instances(n: int) -> list[InstanceRecord]:
    out = []
    for k in range(n):
        verdicts = [Verdict(kind="checkpoint", item_id=f"c{j}", judge_repeat=0, score=None if (k + j) % 5 == 0 else 1.0,
                            status="unscored" if (k + j) % 5 == 0 else "scored", rationale="") for j in range(k % 3)]
        out.append(InstanceRecord(cell=f"cell{k % 4}", instance_id=f"i{k:06d}", repeat=k % 2, user=f"u{k % 97}",
                                  group="g", score=None if k % 7 == 0 else float(k % 101),
                                  status="unscored" if k % 7 == 0 else "scored", verdicts=verdicts,
                                  trace_id=None if k % 3 else f"tr-{k}"))
    return out


def test_a_record_of_5000_instances_with_missing_trace_ids_reads_back_equal(tmp_path):
    instances = _instances(5000)
    assert len(instances) > INLINE_INSTANCES
    record = make_record("run1", ExperimentRef(name="e", file="e.yaml", settings_digest="d", mlflow_experiment="m"),
                         [], instances, None)
    folder = write_record(record, tmp_path)
    assert (folder / INSTANCES).is_file()
    back = read_record(folder)
    assert back.instances == instances  # None stays None: trace ids, scores, verdict scores
    assert sum(i.trace_id is None for i in back.instances) == sum(i.trace_id is None for i in instances) > 3000
