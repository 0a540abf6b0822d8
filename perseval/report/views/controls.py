"""The Controls tables: beside each plain cell's score, what it means (perseval.report.analyses.gains). Per
benchmark, every plain cell: its own score against its swapped-history control (personalization gain) and
against the no-history agent (history gain), each gain with its paired interval, Holm-corrected p and the
users/instances it rests on, and how much gold evidence reached the context. `own` and the reference are means
over the instances both cells scored (so `own` can differ from the headline score, which rests on all of the
cell's). Fitted to the terminal like the headline (perseval.report.views.fit)."""
from __future__ import annotations

from typing import Optional, Sequence

from rich.table import Table

from perseval.report.record import CellRecord, Controls, Gain
from perseval.report.views.fit import Group, fitted
from perseval.report.views.text import MISSING, WITHHELD, gain_text, number_text, p_text

ZERO = "0 (no history)"


def _gain_cells(cell: CellRecord, gain: Optional[Gain]) -> list[str]:
    """own, reference, gain [CI], p, users/n of one gain."""
    controls = cell.controls
    if not cell.interpretable:
        return [WITHHELD] * 3 + ["", ""]
    if controls is not None and controls.zero_by_construction:
        return ["", "", ZERO, "", ""]
    if gain is None:
        return [MISSING, MISSING, MISSING, "", ""]
    return [number_text(gain.own), number_text(gain.reference_score), gain_text(gain), p_text(gain.p_holm),
            f"{gain.users}/{gain.instances}"]


def _evidence_cells(cell: CellRecord) -> list[str]:
    a = cell.attribution
    if a is None:
        return [MISSING, ""]
    if not cell.interpretable:
        return [number_text(a.evidence_recall), WITHHELD]
    return [number_text(a.evidence_recall),
            f"{number_text(a.score_reached)} (n={a.reached}) / {number_text(a.score_missed)} (n={a.missed})"]


def _has(controls: Optional[Controls], kind: str) -> bool:
    return controls is not None and getattr(controls, kind) is not None


def _gain_tables(bench: str, kind: str, short: str, reference: str, cells: Sequence[CellRecord],
                 width: int) -> list[Table]:
    """One gain's table: the means it compares with what they rest on, the gain with its p (two tables where
    one does not fit)."""
    rows = [_gain_cells(c, getattr(c.controls, kind) if c.controls else None) for c in cells]
    groups = [Group(f"own vs {reference} (users/n)", ["own", reference, "users/n"], [[r[0], r[1], r[4]] for r in rows]),
              Group(f"{kind} gain [CI], p", [f"{short} gain [CI]", "p"], [[r[2], r[3]] for r in rows])]
    return fitted(f"Controls, {bench}: {kind} gain = own - {reference}", "cell", [c.label for c in cells], groups,
                  width, part_title=f"Controls, {bench}")


def benchmark_controls(bench: str, cells: Sequence[CellRecord], width: int) -> list[Table]:
    """A benchmark's gains (one table each) and evidence attribution, every plain cell in each."""
    tables = []
    if any(_has(c.controls, "personalization") for c in cells):
        tables += _gain_tables(bench, "personalization", "pers.", "swapped", cells, width)
    if any(_has(c.controls, "history") for c in cells):
        tables += _gain_tables(bench, "history", "hist.", "no hist.", cells, width)
    if any(c.attribution is not None for c in cells):
        tables += fitted(f"Controls, {bench}: evidence recall", "cell", [c.label for c in cells],
                         [Group("evidence", ["evid. recall", "score in / missed"], [_evidence_cells(c) for c in cells])],
                         width)
    return tables


def controls_ran(cells: Sequence[CellRecord]) -> bool:
    """Whether a control run (the swapped-history one) stands behind any cell."""
    return any(c.control is not None for c in cells)


def controls_tables(cells: Sequence[CellRecord], width: int, wide: bool = False) -> list[Table]:
    """Per benchmark with any control or evidence figure, its plain cells. Compact: only when a control ran;
    wide: whenever any cell has a control or evidence figure."""
    if not wide and not controls_ran(cells):
        return []
    benches: dict[str, list[CellRecord]] = {}
    for c in cells:
        if c.control is None:
            benches.setdefault(c.parts.benchmark, []).append(c)
    return [t for bench, members in benches.items() for t in benchmark_controls(bench, members, width)]


CONTROLS_NOTE = ("Controls: own and the reference are means over the instances both cells scored (users/n), so own "
                 "can differ from the headline score; gains are paired over users, p Holm-corrected across every "
                 f"gain shown; {ZERO}: the agent uses no history, so both gains are 0 by construction; {WITHHELD}: the "
                 f"cell's judge does not discriminate; {MISSING}: no such control or reference for the cell.")
