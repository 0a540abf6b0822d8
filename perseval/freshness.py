"""Which units must run: content keys plus make's newer-than rule, decided once per unit.

A key says which inputs and config an output was made from. On top of that, a
part that had failures is redone on the next run, and then everything made from
it must be redone too. So an output counts as done only if it exists whole
(every file its manifest lists), holds no failure, and is newer than every file
it was made from; and a unit whose input will be redone is pending too.
The flow asks once, before a stage, and submits only pending units.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from perseval.plan import AnalysisUnit, Cell, DataUnit, IndexUnit, Plan
from perseval.store import MANIFEST, StageStore


def _newer(path: Path, inputs: list[Path]) -> bool:
    if not path.exists():
        return False
    mtime = path.stat().st_mtime_ns
    return all(p.exists() and p.stat().st_mtime_ns <= mtime for p in inputs)


def part_final(root: str, stage: str, key: str, shard: int) -> bool:
    """The part exists and holds no failed row (a part with failures is redone on the next run; its
    successful requests come back from the request cache, so only the failures cost)."""
    path = StageStore(root, stage, key).part_path(shard)
    if not path.exists():
        return False
    try:
        status = pq.read_table(path, columns=["status"]).column("status").to_pylist()
    except Exception:  # an unreadable part is not done: it is redone, never read as data
        return False
    return "failed" not in status


def data_done(root: str, unit: DataUnit) -> bool:
    return StageStore(root, "data", unit.key).is_complete() and StageStore(root, "documents", unit.key).is_complete()


def index_done(root: str, unit: IndexUnit) -> bool:
    return StageStore(root, "index", unit.key).is_complete()


def _part(root: str, stage: str, key: str, shard: int) -> Path:
    return StageStore(root, stage, key).part_path(shard)


def _manifest(root: str, stage: str, key: str) -> Path:
    return StageStore(root, stage, key).dir / MANIFEST


@dataclass
class Pending:
    """Units (and shards) that must run, computed top-down so that a redone input redoes its outputs."""

    runs: set[tuple[str, int]] = field(default_factory=set)
    judges: set[tuple[str, int]] = field(default_factory=set)
    scores: set[str] = field(default_factory=set)
    analyses: set[str] = field(default_factory=set)

    def models(self, plan: Plan) -> set[str]:
        """Models that some pending run or judge shard needs: only these are served."""
        run_keys, judge_keys = {k for k, _ in self.runs}, {k for k, _ in self.judges}
        needed = {r.backbone for r in plan.runs() if r.key in run_keys}
        needed |= {j.judge.model for j in plan.judgings() if j.judge.uses_llm and j.key in judge_keys}
        return {m for m in needed if m}


def pending(root: str, plan: Plan, shards: dict[str, list[int]]) -> Pending:
    """What must run, given the shards of each data key (known once the data exists)."""
    out = Pending()
    for run in plan.runs():
        for s in shards[run.data.key]:
            if not part_final(root, "run", run.key, s):
                out.runs.add((run.key, s))
    for judged in plan.judgings():
        rkey = judged.run.key
        for s in shards[judged.run.data.key]:
            if (rkey, s) in out.runs or not part_final(root, "judge", judged.key, s) \
                    or not _newer(_part(root, "judge", judged.key, s), [_part(root, "run", rkey, s)]):
                out.judges.add((judged.key, s))
    for cell in plan.cells:
        if _score_pending(root, cell, shards[cell.run.data.key], out):
            out.scores.add(cell.key)
    for unit in plan.analyses:
        if _analysis_pending(root, unit, out):
            out.analyses.add(unit.key)
    return out


def _score_pending(root: str, cell: Cell, cell_shards: list[int], out: Pending) -> bool:
    rkey, jkey = cell.run.key, cell.judged.key
    if any((rkey, s) in out.runs or (jkey, s) in out.judges for s in cell_shards):
        return True
    inputs = [_part(root, "run", rkey, s) for s in cell_shards] + [_part(root, "judge", jkey, s) for s in cell_shards]
    return not StageStore(root, "score", cell.key).is_complete() or not _newer(_manifest(root, "score", cell.key),
                                                                              inputs)


def _analysis_pending(root: str, unit: AnalysisUnit, out: Pending) -> bool:
    if any(c.key in out.scores for c in unit.cells):
        return True
    inputs = [_manifest(root, "score", c.key) for c in unit.cells]
    return not StageStore(root, "analysis", unit.key).is_complete() or \
        not _newer(_manifest(root, "analysis", unit.key), inputs)

