"""IBA-Bench's data tables (paper Tables 2 and 13) counted from whatever instances were built or loaded.

The columns are the paper's; every number is counted from the data in hand (a constructed sample, the full
build or a release on disk), never copied from the paper, so `perseval stats` shows what a run really uses.
QA probes are derived from task instances and are left out, as the paper's counts are of tasks.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

import pandas as pd

from perseval.benchmarks.iba.distribution import BUCKETS, OVERALL, bucket
from perseval.benchmarks.iba.qa import task_instances
from perseval.benchmarks.iba.views import IbaGold, IbaPayload
from perseval.core.instances import Instance

SCENARIO_COLUMNS = ["domain", "scenario", "D", "P", "I", "Dyn.", "action"]


def _values(preferences: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(dimension, value) pairs a scenario's instances use; a dynamic preference's earlier value counts too,
    because the scenario has to define both ends of the shift."""
    seen = {(p["dimension"], p["value"]) for p in preferences}
    return seen | {(p["dimension"], p["previous"]) for p in preferences if p.get("previous") is not None}


def scenario_table(instances: Iterable[Instance]) -> pd.DataFrame:
    """Table 13: per scenario, dimensions (D), preference values (P), instances (I), dynamic support, action."""
    by_scenario: dict[tuple[str, str], list[tuple[IbaPayload, IbaGold]]] = defaultdict(list)
    for inst in task_instances(instances):
        payload = IbaPayload.of(inst)
        by_scenario[(inst.group, payload.scenario)].append((payload, IbaGold.of(inst)))
    rows = []
    for (domain, scenario), group in sorted(by_scenario.items()):
        prefs = [p for _, gold in group for p in gold.preferences]
        rows.append({"domain": domain, "scenario": scenario, "D": len({p["dimension"] for p in prefs}),
                     "P": len(_values(prefs)), "I": len(group),
                     "Dyn.": "yes" if any(payload.dynamic for payload, _ in group) else "no",
                     "action": "/".join(sorted({payload.action_type for payload, _ in group}))})
    return pd.DataFrame(rows, columns=SCENARIO_COLUMNS)


def _domain_row(scenarios: pd.DataFrame, group: list[Instance]) -> dict[str, Any]:
    row: dict[str, Any] = {"S": len(scenarios), "D": int(scenarios["D"].sum()),
                           "P": int(scenarios["P"].mean()) if len(scenarios) else 0,  # integer-truncated mean
                           "I": len(group)}
    payloads = [IbaPayload.of(inst) for inst in group]
    for label, values in (("evidence", [p.n_evidence for p in payloads]),
                          ("constraints", [p.n_constraints for p in payloads])):
        counts = {b: 0 for b in BUCKETS}
        for value in values:
            counts[bucket(int(value))] += 1  # a task instance has both counts
        row.update({f"#{label} {b}": n for b, n in counts.items()})
    return row


def domain_table(instances: Iterable[Instance]) -> pd.DataFrame:
    """Table 2: per domain and overall, S, D, P (truncated mean over scenarios), I and the #evidence /
    #constraints distributions (1, 2, 3, 4, 5+); each distribution sums to I."""
    tasks = task_instances(instances)
    scenarios = scenario_table(tasks)
    rows = {domain: _domain_row(scenarios[scenarios["domain"] == domain], [i for i in tasks if i.group == domain])
            for domain in sorted({i.group for i in tasks})}
    rows[OVERALL] = _domain_row(scenarios, tasks)
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "domain"
    return frame
