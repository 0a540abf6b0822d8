"""Dataset statistics of the mined cases, in the layout of a benchmark's data table: per category, per
(query level x candidate set) cell, and the distributions of session lengths and candidate-set sizes.

Computed from the instances alone (their gold session summary), so the same tables serve
`perseval stats CONFIG` and the run's analysis artifacts.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from perseval.benchmarks.apeb.views import ApebGold, ApebPayload
from perseval.core.instances import Instance

OVERALL = "Overall"


def _sessions(instances: list[Instance]) -> pd.DataFrame:
    """One row per mined session (a user's instances share it)."""
    rows = {}
    for inst in instances:
        s, payload = ApebGold.of(inst).session, ApebPayload.of(inst)
        hard = len(payload.candidates) if payload.candidate_set.startswith("hard") else None
        row = rows.setdefault(inst.user_id, {
            "category": inst.group, "queries": len(s.get("queries", [])), "session_events": s.get("n_events"),
            "session_minutes": s.get("minutes"), "browsed_products": s.get("browsed"),
            "considered_products": len(s.get("considered", [])), "history_events": s.get("history_events"),
            "hard_candidates": None})
        if hard is not None:
            row["hard_candidates"] = hard
    return pd.DataFrame(list(rows.values()))


def by_category(sessions: pd.DataFrame) -> pd.DataFrame:
    cols = ["queries", "session_events", "session_minutes", "browsed_products", "history_events", "hard_candidates"]
    grouped = sessions.groupby("category")
    table = grouped[cols].mean().add_prefix("avg_")
    table.insert(0, "sessions", grouped.size())
    overall = sessions[cols].mean().add_prefix("avg_")
    overall["sessions"] = len(sessions)
    table.loc[OVERALL] = overall[table.columns]
    table.insert(1, "share_%", 100.0 * table["sessions"] / len(sessions))
    table.index.name = "category"
    return table.astype({"sessions": int})


def _cell_row(instance: Instance, payload: ApebPayload) -> dict[str, Any]:
    return {"query_level": payload.query_level, "candidate_set": payload.candidate_set, "user": instance.user_id,
            "category": instance.group, "candidates": len(payload.candidates), "query_words": len(instance.query.split())}


def by_cell(instances: list[Instance]) -> pd.DataFrame:
    frame = pd.DataFrame([_cell_row(i, ApebPayload.of(i)) for i in instances])
    return frame.groupby(["query_level", "candidate_set"]).agg(
        instances=("user", "size"), sessions=("user", "nunique"), categories=("category", "nunique"),
        candidates_min=("candidates", "min"), candidates_mean=("candidates", "mean"),
        candidates_max=("candidates", "max"), avg_query_words=("query_words", "mean"))


def distributions(sessions: pd.DataFrame) -> pd.DataFrame:
    cols = ["queries", "session_events", "session_minutes", "browsed_products", "considered_products",
            "history_events", "hard_candidates"]
    present = [c for c in cols if sessions[c].notna().any()]
    table = sessions[present].astype(float).describe(percentiles=[0.25, 0.5, 0.75]).T
    table.index.name = "per session"
    return table.rename(columns={"50%": "median"})


def dataset_tables(instances: list[Instance]) -> dict[str, pd.DataFrame]:
    if not instances:
        return {}
    sessions = _sessions(instances)
    return {"dataset_by_category": by_category(sessions), "dataset_by_cell": by_cell(instances),
            "dataset_distributions": distributions(sessions)}
