"""`perseval compare` with error bars: each cell's difference between runs (or to a baseline agent's cell within
a run), with its interval, a Holm-corrected p-value and the verdict at the n it rests on, computed from the runs'
records (each instance's score and its user).

Two cells are compared paired when they were scored on the same instances (the same data key); otherwise
unpaired, and the table says so. A cell whose judge does not discriminate is compared with nothing: its row
says why, and it stays out of the Holm family.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from perseval.metrics.differences import compare_values
from perseval.metrics.settings import StatisticsSettings
from perseval.metrics.uncertainty import Difference, holm, users_needed
from perseval.report.analyses.comparisons import difference_mde, pick_baseline
from perseval.report.record import CellRecord, RunRecord
from perseval.report.words import NOT_INTERPRETABLE


@dataclass(frozen=True)
class Pair:
    """a - b: `label` names it as the views do, `against` what it is measured against."""

    label: str
    against: str
    a: CellRecord
    b: CellRecord
    a_record: RunRecord
    b_record: RunRecord


def cell_values(record: RunRecord, cell: CellRecord) -> pd.DataFrame:
    """Index instance_id; columns user_id, value: the cell's score per instance, repeats averaged."""
    rows = pd.DataFrame([{"instance_id": i.instance_id, "user_id": i.user, "value": i.score}
                         for i in record.cell_instances(cell.key)], columns=["instance_id", "user_id", "value"])
    rows["value"] = rows["value"].astype(float)
    return rows.groupby("instance_id").agg(user_id=("user_id", "first"), value=("value", "mean"))


def _difference(p: Pair, statistics: StatisticsSettings) -> tuple[Optional[Difference], str]:
    """a - b and a note ("" / "unpaired: different instances" / why there is none)."""
    if not (p.a.interpretable and p.b.interpretable):
        return None, NOT_INTERPRETABLE
    paired = p.a.data_key is not None and p.a.data_key == p.b.data_key
    d = compare_values(cell_values(p.a_record, p.a), cell_values(p.b_record, p.b), statistics, paired)
    return d, "" if paired else "unpaired: different instances"


def verdict(d: Optional[Difference], p_holm: Optional[float], alpha: float = 0.05) -> str:
    if d is None or d.mean is None:
        return ""
    mde, _ = difference_mde(d)
    at = f"n = {d.n_users} users" + (f", MDE {mde:.1f}" if mde is not None else ", no MDE (no variation)")
    if p_holm is not None and p_holm < alpha:
        return f"significant at {at}"
    return f"not significant at {at}"


def differences(pairs: list[Pair], statistics: StatisticsSettings, detect: float | None = None) -> pd.DataFrame:
    """One row per pair: a - b with its interval, the p-value Holm-corrected across all the pairs, and the
    verdict at its n; with `detect`, the users a study would need to detect a difference of that size
    (80% power, alpha 0.05), this comparison's paired SE taken as the pilot's."""
    results = [(p, *_difference(p, statistics)) for p in pairs]
    adjusted = holm([d.p_value if d else None for _, d, _ in results])
    rows = []
    for (p, d, note), p_holm in zip(results, adjusted):
        rows.append({"cell": p.label, "metric": p.a.metric, "against": p.against, "Δ": d.mean if d else None,
                     "ci_low": d.ci_low if d else None, "ci_high": d.ci_high if d else None, "p (Holm)": p_holm,
                     "n_users": d.n_users if d else None, "mde": difference_mde(d)[0],
                     "paired": d.paired if d else None, "verdict": verdict(d, p_holm), "note": note})
        if detect is not None:
            rows[-1][f"users for Δ {detect:g}"] = users_needed(d.se, d.n_users, detect) \
                if d and difference_mde(d)[0] is not None and d.n_users >= 2 else None
    columns = ["cell", "metric", "against", "Δ", "ci_low", "ci_high", "p (Holm)", "n_users", "mde", "paired",
               "verdict", "note"]
    frame = pd.DataFrame(rows, columns=columns + ([f"users for Δ {detect:g}"] if detect is not None else []))
    if detect is not None:  # whole users, blank where no SE says how many (never a float "362.0")
        frame[f"users for Δ {detect:g}"] = frame[f"users for Δ {detect:g}"].astype("Int64")
    return frame


def _label(cell: CellRecord) -> str:
    return f"{cell.parts.benchmark}/{cell.label}"


def run_pairs(records: list[RunRecord]) -> list[Pair]:
    """Each cell of each later run against the same cell (by name and metric) in the first run."""
    if len(records) < 2:
        return []
    first = {(c.name, c.metric): c for c in records[0].cells}
    pairs = []
    for r in records[1:]:
        for c in r.cells:
            if (c.name, c.metric) in first:
                pairs.append(Pair(_label(c), f"{records[0].run_id[:8]} -> {r.run_id[:8]}", c,
                                  first[(c.name, c.metric)], r, records[0]))
    return pairs


def within_pairs(record: RunRecord, baseline: str) -> list[Pair]:
    """Within one run: each cell against the cell of agent `baseline` of the same benchmark, judge and control
    (and the same backbone and retriever where the baseline has them: perseval.report.analyses.comparisons)."""
    pairs = []
    for cell in record.cells:
        if cell.parts.agent == baseline:
            continue
        candidates = [({"backbone": c.parts.backbone, "retriever": c.parts.retriever}, c) for c in record.cells
                      if c.parts.agent == baseline and c.control == cell.control
                      and c.parts.benchmark == cell.parts.benchmark and c.parts.judge == cell.parts.judge]
        base = pick_baseline({"backbone": cell.parts.backbone, "retriever": cell.parts.retriever}, candidates)
        if base is not None and base.metric == cell.metric:
            pairs.append(Pair(_label(cell), f"{base.label} in {record.run_id[:8]}", cell, base, record, record))
    return pairs


def changed_cells(records: list[RunRecord]) -> list[tuple[RunRecord, CellRecord, CellRecord]]:
    """(later record, cell in the first, the same cell in the later) for every cell whose key (its results'
    inputs) changed between the first run and a later one."""
    first = {c.name: c for c in records[0].cells} if records else {}
    return [(r, first[c.name], c) for r in records[1:] for c in r.cells if c.name in first and first[c.name].key != c.key]
