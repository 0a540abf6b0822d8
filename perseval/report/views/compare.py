"""`perseval compare`'s views, rendered from the runs' records: each cell's score [CI] (users) in each run side
by side, one table per benchmark fitted to the terminal, with the change from the first run (the paired
difference of perseval.report.analyses.run_compare, not a subtraction of two points); the same figures as a
frame for `--out`; and the differences with their error bars."""
from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd
from rich.table import Table

from perseval.report.record import CellRecord, RunRecord
from perseval.report.views.fit import Group, fitted
from perseval.report.views.text import WITHHELD, interval_text, p_text, score_text, status_short


def _rows(records: Sequence[RunRecord]) -> list[tuple[str, str, str, dict[str, CellRecord]]]:
    """(benchmark, label, metric, run id -> the cell in that run), in the first run's order, then the cells a
    later run adds; a control cell right under its cell (the records' order)."""
    out: dict[tuple[str, str], tuple[str, str, str, dict[str, CellRecord]]] = {}
    for r in records:
        for c in r.cells:
            entry = out.setdefault((c.name, c.metric), (c.parts.benchmark, c.label, c.metric, {}))
            entry[3][r.run_id] = c
    return list(out.values())


def _delta(diffs: pd.DataFrame, cell: CellRecord, run_id: str) -> Optional[pd.Series]:
    if diffs.empty:
        return None
    found = diffs[(diffs["cell"] == f"{cell.parts.benchmark}/{cell.label}") & (diffs["metric"] == cell.metric)
                  & diffs["against"].str.endswith(f"-> {run_id[:8]}")]
    return None if found.empty else found.iloc[0]


def compare_frame(records: Sequence[RunRecord], diffs: pd.DataFrame, cost: bool = False) -> pd.DataFrame:
    """One row per cell (and metric): per run its score, interval, users, instances scored and status as the
    record holds them (no number where the cell is not interpretable), per later run the difference from the
    first; with `cost`, each run's tokens and dollars."""
    rows = []
    for bench, label, metric, by_run in _rows(records):
        row: dict[str, object] = {"benchmark": bench, "cell": label, "metric": metric}
        for r in records:
            c, rid = by_run.get(r.run_id), r.run_id[:8]
            e = c.estimate if c is not None else None
            row |= {f"score {rid}": e.point if e else None, f"ci_low {rid}": e.low if e else None,
                    f"ci_high {rid}": e.high if e else None, f"users {rid}": e.users if e else None,
                    f"n {rid}": c.status.scored if c else None, f"status {rid}": c.status.word if c else None,
                    f"interpretable {rid}": c.interpretable if c else None}
            if cost:
                row |= {f"tokens_in {rid}": c.cost.tokens_in if c else None,
                        f"tokens_out {rid}": c.cost.tokens_out if c else None,
                        f"cost_usd {rid}": c.cost.cost_usd if c else None}
        first = by_run.get(records[0].run_id) if records else None
        for r in records[1:]:
            later = by_run.get(r.run_id)
            d = _delta(diffs, later, r.run_id) if later is not None and first is not None else None
            row[f"Δ {r.run_id[:8]}"] = None if d is None or d["Δ"] != d["Δ"] else d["Δ"]
        rows.append(row)
    frame = pd.DataFrame(rows)
    counts = [c for c in frame.columns if c.split(" ")[0] in ("users", "n", "tokens_in", "tokens_out")]
    return frame.astype({c: "Int64" for c in counts})  # whole numbers, blank where the run lacks the cell


def _scored(c: Optional[CellRecord]) -> str:
    """"27.8 [9.6, 58.1] (4)": the score, its interval and the users it rests on ("—" / "-" as score_text)."""
    if c is None:
        return ""
    shown = c.interpretable and c.estimate.point is not None and c.estimate.users is not None
    return score_text(c) + (f" ({c.estimate.users})" if shown else "")


def compare_tables(records: Sequence[RunRecord], frame: pd.DataFrame, width: int, cost: bool = False) -> list[Table]:
    """Per benchmark: each cell's score [CI] (users) per run, the change from the first, its status."""
    ids = [r.run_id[:8] for r in records]
    rows = _rows(records)
    tables = []
    for bench in dict.fromkeys(b for b, _, _, _ in rows):
        members = [(k, row) for k, row in enumerate(rows) if row[0] == bench]
        metrics = ", ".join(sorted({m for _, (_, _, m, _) in members}))
        groups = []
        for r in records:
            groups.append(Group(f"run {r.run_id[:8]}", [r.run_id[:8]],
                                [[_scored(row[3].get(r.run_id))] for _, row in members]))
        for rid in ids[1:]:
            groups.append(Group(f"Δ {rid}", [f"Δ {rid}"],
                                [[_change(frame.iloc[k][f"Δ {rid}"], row[3].get(records[0].run_id))]
                                 for k, row in members]))
        groups.append(Group("status", [f"status {rid}" for rid in ids],
                            [[status_short(row[3][r.run_id]) if r.run_id in row[3] else "" for r in records]
                             for _, row in members], left=True))
        if cost:
            groups.append(Group("tokens in/out", [f"tokens {rid}" for rid in ids],
                                [[_tokens(row[3].get(r.run_id)) for r in records] for _, row in members]))
        title = f"{bench}: {metrics} (0-100) [95% CI] (users) per run"
        levels = {row[3][r.run_id].estimate.level for _, row in members for r in records if r.run_id in row[3]}
        if levels and levels != {0.95}:
            title = title.replace("95%", "/".join(f"{100 * v:g}%" for v in sorted(levels)))
        tables += fitted(title, "cell", [row[1] for _, row in members], groups, width, part_title=bench)
    return tables


def _change(value: object, first: Optional[CellRecord]) -> str:
    if first is not None and not first.interpretable:
        return WITHHELD
    return "" if value is None or value != value else f"{float(value):+.1f}"  # type: ignore[arg-type]


def _tokens(c: Optional[CellRecord]) -> str:
    if c is None or c.cost.tokens_in is None:
        return ""
    usd = f", {c.cost.cost_usd:.4f} USD" if c.cost.cost_usd is not None else ""
    return f"{c.cost.tokens_in} / {c.cost.tokens_out}{usd}"


def shown_differences(frame: pd.DataFrame) -> pd.DataFrame:
    """The differences as a reader sees them: "+3.1 [-8.0, +14.2]", p to two places, the verdict."""
    def delta(r: pd.Series) -> str:
        if r["Δ"] is None or r["Δ"] != r["Δ"]:
            return WITHHELD if r["note"] else ""
        ci = interval_text(r["ci_low"], r["ci_high"], signed=True) if r["ci_low"] == r["ci_low"] else ""
        return f"{r['Δ']:+.1f}" + (f" {ci}" if ci else "")

    out = pd.DataFrame({"cell": frame["cell"], "metric": frame["metric"], "against": frame["against"],
                        "Δ [CI]": [delta(r) for _, r in frame.iterrows()],
                        "p (Holm)": frame["p (Holm)"].map(lambda v: p_text(None if v != v else v)),
                        "verdict": frame["verdict"], "note": frame["note"]})
    for col in (c for c in frame.columns if c.startswith("users for")):
        out[col] = frame[col].map(lambda v: "" if pd.isna(v) else f"{int(v)}")
    return out.set_index("cell")
