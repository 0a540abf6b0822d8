"""Records built in code for the record and view tests: instances in bulk (missing trace ids, scores and verdict
scores), and cells with the sections a view reads."""
from __future__ import annotations

from typing import Optional

from perseval.report.names import short_names
from perseval.report.record import CellRecord, Estimate, InstanceRecord, Parts, ProbeCheck, Status, Verdict
from perseval.report.words import NOT_INTERPRETABLE


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


def cell(bench: str, agent: str, judge: str, point: Optional[float], low: Optional[float] = None,
         high: Optional[float] = None, users: Optional[int] = None, backbone: str = "m", role: str = "history",
         flagged: bool = False, scored: int = 4) -> CellRecord:
    """A plain cell as the record holds it (its label set by `labelled`); `flagged`: its judge does not
    discriminate, so its numbers are withheld as the record withholds them."""
    probe = ProbeCheck(auc=0.5, pass_rate_gold=100.0, pass_rate_bad=100.0, discriminates=False, items=12,
                       flag=NOT_INTERPRETABLE) if flagged else None
    estimate = Estimate(point=None if flagged else point, low=None if flagged else low,
                        high=None if flagged else high, level=0.95, users=users, se=None, mde=None,
                        uninterpretable_mean=point if flagged else None,
                        uninterpretable_reason=NOT_INTERPRETABLE if flagged else None)
    return CellRecord(key=f"{bench}-{agent}-{backbone}-{judge}", name=f"{bench}/{agent}/{backbone}/-/{judge}",
                      label=agent, parts=Parts(benchmark=bench, agent=agent, backbone=backbone, retriever="-",
                                               judge=judge),
                      role=role, metric="score", status=Status(word="complete", instances=scored, scored=scored,
                                                               scored_share=100.0),
                      estimate=estimate, probe=probe)


def labelled(cells: list[CellRecord]) -> list[CellRecord]:
    """The cells with their labels as the record gives them (perseval.report.names.short_names)."""
    names = short_names([tuple(c.parts.model_dump().values()) for c in cells])
    return [c.model_copy(update={"label": n}) for c, n in zip(cells, names)]
