"""The cross-benchmark summary: one row per kind of agent, one column per benchmark, each cell the
headline score with its user-clustered interval (issue 34).

An agent's kind here is its role in a personalization comparison, read from its resolved spec: `oracle`
(it is given the gold, or is a benchmark's `.oracle` kind: IBA's reads the history's evidence tags),
`no history` (it uses no history capability: the floor) or `history` (it reads the
user's history, retrieved or whole). A benchmark with several agents of a role lists each, by name; a cell
with several judges names the judge. Built from the headline rows of a run (the summary JSON's `headline`),
so it needs nothing but the plan's specs: the track stage logs it as the parent run's `cross_benchmark.md`
when a run holds two benchmarks or more, and `scripts/cross_benchmark_table.py CONFIG SUMMARY_JSON` prints it.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping

import pandas as pd

from perseval.pipeline.controls import uses_history
from perseval.experiment.config import ResolvedExperiment
from perseval.experiment.load import bound
from perseval.kernel.registry import agent_class

ROLES = ("history", "no history", "oracle")


def agent_roles(exp: ResolvedExperiment) -> dict[str, str]:
    """Agent name -> its role (history, no history, oracle)."""
    out = {}
    for name, spec in bound(exp).agents.items():
        if getattr(agent_class(spec.kind), "reads_gold", False) or spec.kind.endswith(".oracle"):
            out[name] = "oracle"
        else:
            out[name] = "history" if uses_history(spec.needs) else "no history"
    return out


def _cell(row: Mapping[str, Any]) -> str:
    score = row.get("score")
    if score is None:
        return "-"
    low, high, users = row.get("ci_low"), row.get("ci_high"), row.get("n_users")
    interval = f" [{low:.1f}, {high:.1f}]" if low is not None and high is not None else ""
    return f"{score:.1f}{interval}" + (f" ({users} users)" if users else "")


def cross_benchmark_table(rows: Iterable[Mapping[str, Any]], roles: Mapping[str, str]) -> pd.DataFrame:
    """Role x benchmark: each cell `agent: score [low, high]` (`/backbone`, `/judge` when an agent has several), one
    line per agent; control rows (another user's history) are left out, they are not a kind of agent."""
    rows = [r for r in rows if not r.get("control")]
    judges: dict[tuple[str, str], set[str]] = defaultdict(set)
    backbones: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in rows:
        judges[(r["benchmark"], r["agent"])].add(r["judge"])
        backbones[(r["benchmark"], r["agent"])].add(str(r.get("backbone", "")))
    cells: dict[tuple[str, str], list[str]] = defaultdict(list)
    benchmarks: list[str] = []
    for r in rows:
        bench, agent = r["benchmark"], r["agent"]
        if bench not in benchmarks:
            benchmarks.append(bench)
        label = agent + (f"/{r.get('backbone')}" if len(backbones[(bench, agent)]) > 1 else "") + \
            (f"/{r['judge']}" if len(judges[(bench, agent)]) > 1 else "")
        cells[(roles.get(agent, "history"), bench)].append(f"{label}: {_cell(r)}")
    present = [role for role in ROLES if any((role, b) in cells for b in benchmarks)]
    data = {b: ["; ".join(cells.get((role, b), [])) or "-" for role in present] for b in benchmarks}
    return pd.DataFrame(data, index=pd.Index(present, name="agent kind"))


def cross_benchmark_markdown(rows: list[Mapping[str, Any]], exp: ResolvedExperiment) -> str | None:
    """The table as Markdown, or None for a run of one benchmark (the headline says it all)."""
    if len({r["benchmark"] for r in rows}) < 2:
        return None
    return "95% user-clustered intervals; (n users)\n\n" + cross_benchmark_table(rows, agent_roles(exp)).to_markdown()

