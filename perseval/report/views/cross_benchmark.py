"""The cross-benchmark summary: one row per kind of agent, one column per benchmark, each cell the headline
score with its user-clustered interval and users, rendered from the run record.

An agent's kind here is its role in a personalization comparison, as the record holds it (perseval.report.build.
agent_roles): `oracle` (it is given the gold), `no history` (it uses no history capability: the floor) or
`history` (it reads the user's history, retrieved or whole). A benchmark with several agents of a role lists
each, by its label; control cells are left out (another user's history is not a kind of agent). The track stage
logs it as the parent run's `cross_benchmark.md` when a run holds two benchmarks or more, and
`scripts/cross_benchmark_table.py RECORD` prints it.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import pandas as pd

from perseval.report.record import CellRecord
from perseval.report.views.text import level_text, score_text

ROLES = ("history", "no history", "oracle")


def _cell(c: CellRecord) -> str:
    users = c.estimate.users if c.interpretable else None
    return score_text(c) + (f" ({users} users)" if users else "")


def cross_benchmark_table(cells: Sequence[CellRecord]) -> pd.DataFrame:
    """Role x benchmark: each entry `label: score [low, high] (users)`, one per cell, `; `-joined."""
    cells = [c for c in cells if c.control is None]
    by: dict[tuple[str, str], list[str]] = defaultdict(list)
    benchmarks = list(dict.fromkeys(c.parts.benchmark for c in cells))
    for c in cells:
        by[(c.role, c.parts.benchmark)].append(f"{c.label}: {_cell(c)}")
    present = [role for role in ROLES if any((role, b) in by for b in benchmarks)]
    data = {b: ["; ".join(by.get((role, b), [])) or "-" for role in present] for b in benchmarks}
    return pd.DataFrame(data, index=pd.Index(present, name="agent kind"))


def cross_benchmark_markdown(cells: Sequence[CellRecord]) -> str | None:
    """The table as Markdown, or None for a run of one benchmark (the headline says it all)."""
    plain = [c for c in cells if c.control is None]
    if len({c.parts.benchmark for c in plain}) < 2:
        return None
    levels = " / ".join(sorted({level_text(c.estimate.level) for c in plain}))
    return (f"{levels} user-clustered intervals; (n users); —: the judge does not discriminate\n\n"
            + cross_benchmark_table(plain).to_markdown())
