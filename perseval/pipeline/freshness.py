"""Which units must run: content keys plus make's newer-than rule, decided once per unit.

A key says which inputs and config an output was made from. On top of that, a
part that had failures is redone on the next run, and then everything made from
it must be redone too. So an output counts as done only if it exists whole
(every file its manifest lists), holds no failure, and is newer than every file
it was made from; and a unit whose input will be redone is pending too.
The flow asks once, before a stage, and submits only pending units.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from perseval.kernel.capabilities import needs_model
from perseval.pipeline.units import AnalysisUnit, Cell, DataUnit, IndexUnit, JudgeUnit, Plan
from perseval.core.store import MANIFEST, StageStore, atomic_write_text

SHARDS_FILE = "_shards.json"  # beside a run or judge output's parts: how many instances each part holds


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
        needed = {r.backbone for r in plan.runs() if needs_model(r.agent.needs) and r.key in run_keys}
        needed |= {m.name for r in plan.runs() if r.key in run_keys for m in r.roles.values()}
        needed |= {j.model.name for j in plan.judgings() if j.judge.uses_llm and j.model and j.key in judge_keys}
        return {m for m in needed if m}


def judge_done(root: str, judged: JudgeUnit, shard: int) -> bool:
    """Final, and newer than the run part it judged (a redone run part makes its judgments stale)."""
    path = _part(root, "judge", judged.key, shard)
    return part_final(root, "judge", judged.key, shard) and _newer(path, [_part(root, "run", judged.run.key, shard)])


def score_done(root: str, cell: Cell, cell_shards: list[int]) -> bool:
    inputs = [_part(root, stage, key, s) for stage, key in (("run", cell.run.key), ("judge", cell.judged.key))
              for s in cell_shards]
    if cell.probe is not None:  # scored at its probe's calibrated threshold: a redone probe rescores it
        inputs.append(_manifest(root, "probe", cell.probe))
    return StageStore(root, "score", cell.key).is_complete() and _newer(_manifest(root, "score", cell.key), inputs)


def analysis_done(root: str, unit: AnalysisUnit) -> bool:
    inputs = [_manifest(root, "score", c.key) for c in unit.cells]
    return StageStore(root, "analysis", unit.key).is_complete() and _newer(_manifest(root, "analysis", unit.key), inputs)


def pending(root: str, plan: Plan, shards: dict[str, list[int]]) -> Pending:
    """What must run, given the shards of each data key (known once the data exists)."""
    out = Pending()
    for run in plan.runs():
        out.runs |= {(run.key, s) for s in shards[run.data.key] if not part_final(root, "run", run.key, s)}
    for judged in plan.judgings():
        out.judges |= {(judged.key, s) for s in shards[judged.run.data.key]
                       if (judged.run.key, s) in out.runs or not judge_done(root, judged, s)}
    for cell in plan.cells:
        cell_shards = shards[cell.run.data.key]
        if any((cell.run.key, s) in out.runs or (cell.judged.key, s) in out.judges for s in cell_shards) \
                or not score_done(root, cell, cell_shards):
            out.scores.add(cell.key)
    for unit in plan.analyses:
        if any(c.key in out.scores for c in unit.cells) or not analysis_done(root, unit):
            out.analyses.add(unit.key)
    return out


def reshard(root: str, plan: Plan, sizes: dict[str, int], legacy: int) -> list[str]:
    """Make every run and judge output's parts hold shards of this run's size (`sizes`: data key -> instances
    per shard): an output written in shards of another size is cleared (its parts would cover other instances
    under the same part numbers; its answers come back from the request cache), and each output records its
    size. An output written before sizes were recorded was written in shards of `legacy` (the experiment's
    explicit shard_size, else the fixed default of then). Returns the outputs cleared, as stage/key."""
    cleared = []
    units = [("run", r.key, r.data.key) for r in plan.runs()] + \
        [("judge", j.key, j.run.data.key) for j in plan.judgings()]
    for stage, key, data_key in units:
        store, size = StageStore(root, stage, key), sizes[data_key]
        layout = store.dir / SHARDS_FILE
        try:
            recorded = json.loads(layout.read_text())["shard_size"]
        except (OSError, ValueError, KeyError, TypeError):
            recorded = legacy if store.parts() else size
        if recorded != size:
            store.clear()
            cleared.append(f"{stage}/{key}")
        if recorded != size or not layout.exists():
            atomic_write_text(json.dumps({"shard_size": size}), layout)
    return cleared
