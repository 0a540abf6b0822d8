"""Records built in bulk for the record tests: instances with missing trace ids, scores and verdict scores."""
from __future__ import annotations

from perseval.report.record import InstanceRecord, Verdict


def many_instances(n: int) -> list[InstanceRecord]:
    out = []
    for k in range(n):
        verdicts = [Verdict(kind="checkpoint", item_id=f"c{j}", judge_repeat=0, score=None if (k + j) % 5 == 0 else 1.0,
                            status="unscored" if (k + j) % 5 == 0 else "scored", rationale="") for j in range(k % 3)]
        out.append(InstanceRecord(cell=f"cell{k % 4}", instance_id=f"i{k:06d}", repeat=k % 2, user=f"u{k % 97}",
                                  group="g", score=None if k % 7 == 0 else float(k % 101),
                                  status="unscored" if k % 7 == 0 else "scored", verdicts=verdicts,
                                  trace_id=None if k % 3 else f"tr-{k}"))
    return out
