"""Cells compared with their uncertainty: each cell against its benchmark's baseline agent in the headline,
and the same cell in two runs in `perseval compare`.

Two cells are compared paired when they were scored on the same instances (the same data key: the same
benchmark build), over the instances both scored; otherwise unpaired, and the result says so. The
p-values of the comparisons one table shows are Holm-corrected together.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

import pandas as pd

from perseval.metrics.differences import compare_values, instance_values
from perseval.metrics.uncertainty import Difference, holm
from perseval.pipeline.units import Cell, Plan
from perseval.core.instances import InstanceScore
from perseval.core.store import StageStore
from perseval.report.analyses.status import spread


def cell_values(root: str, cell: Cell, metric: str) -> pd.DataFrame:
    return instance_values(StageStore(root, "score", cell.key).read_records(InstanceScore), metric)


T = TypeVar("T")
FREE = (None, "-")  # a cell without a backbone (an agent that uses no model) or without a retriever


def pick_baseline(cell: Mapping[str, str | None], candidates: list[tuple[Mapping[str, str | None], T]]) -> T | None:
    """The candidate (the baseline agent's cells of the same benchmark and judge) that `cell` is measured
    against: the same backbone and retriever where both have them (a no-history baseline has no retriever;
    an oracle without a backbone meets the baseline's only one); None when that leaves no cell or several."""
    for attr in ("backbone", "retriever"):
        same = [c for c in candidates if c[0][attr] == cell[attr]]
        free = [c for c in candidates if c[0][attr] in FREE]
        candidates = same or free or (candidates if cell[attr] in FREE else [])
    return candidates[0][1] if len(candidates) == 1 else None


def baseline_cell(plan: Plan, cell: Cell) -> Cell | None:
    """The cell of the entry's baseline agent that `cell` is compared with (perseval.report.analyses.comparisons.pick_baseline)."""
    baseline = plan.exp.experiment.benchmarks[cell.bench_index].baseline
    if baseline is None or cell.agent == baseline:
        return None

    def attrs(c: Cell) -> dict[str, str | None]:
        return {"backbone": c.backbone, "retriever": c.retriever}

    return pick_baseline(attrs(cell), [(attrs(c), c) for c in plan.cells if c.bench_index == cell.bench_index
                                       and c.agent == baseline and c.judge == cell.judge])


@dataclass(frozen=True)
class Comparison:
    baseline: Cell
    difference: Difference
    p_holm: float | None  # the difference's p-value, Holm-corrected across the table's comparisons


def baseline_comparisons(plan: Plan, root: str, metrics: dict[str, str], interpretable: set[str] | None = None,
                         frame: Callable[[Cell], pd.DataFrame] | None = None) -> dict[str, Comparison]:
    """Cell key -> its comparison with its baseline cell, on the headline metric (`metrics`: cell key ->
    headline metric), for the plain cells whose score and baseline's score are both `interpretable` (default:
    all); the Holm family is those comparisons. Cells of one benchmark entry share their instances: always
    paired."""
    statistics = plan.exp.experiment.statistics
    values: dict[str, pd.DataFrame] = {}

    def of(c: Cell) -> pd.DataFrame:  # `frame`: the caller's reader of a cell's values (read once per track)
        if c.key not in values:
            values[c.key] = frame(c) if frame is not None else cell_values(root, c, metrics[c.key])
        return values[c.key]

    found = {}
    for cell in plan.cells:
        base = baseline_cell(plan, cell) if cell.run.control is None else None
        if interpretable is not None and (cell.key not in interpretable or base is None or base.key not in interpretable):
            continue
        scored = base is not None and all(StageStore(root, "score", c.key).parts() for c in (cell, base))
        if scored and metrics[cell.key] == metrics[base.key]:
            found[cell.key] = (base, compare_values(of(cell), of(base), statistics,
                                                    paired=cell.run.data.key == base.run.data.key))
    adjusted = holm([d.p_value for _, d in found.values()])
    return {k: Comparison(base, d, p) for (k, (base, d)), p in zip(found.items(), adjusted)}


def difference_mde(d: Difference | None) -> tuple[float | None, str | None]:
    """A difference's MDE, or None and why: from an SE of 0 beside an interval with a width it would read 0,
    a precision the interval does not have (perseval.report.analyses.status.spread)."""
    if d is None:
        return None, None
    _, reason = spread(d.se, d.ci_low, d.ci_high)
    return (None, reason) if reason else (d.mde, None)
