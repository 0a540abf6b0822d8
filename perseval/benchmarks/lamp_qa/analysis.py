"""LaMP-QA's tables: the paper's results table (one row per system, one column per category: the mean
per-question score on the paper's 0..1 scale) and the long form of every per-question mean with its
user-clustered interval (each question is a user). Agent and judge repeats of one question are averaged
first (LaMP's `intervals`)."""
from __future__ import annotations

from typing import Any

import pandas as pd

from perseval.benchmarks.profile_questions import intervals
from perseval.benchmarks.lamp_qa.layout import CATEGORIES


def paper_table(long: pd.DataFrame) -> pd.DataFrame:
    """System x category: the mean `score` / 100, in the paper's category order."""
    sub = long[long["metric"] == "score"]
    if sub.empty:
        return pd.DataFrame()
    wide = sub.pivot_table(index="system", columns="task", values="mean", aggfunc="first") / 100.0
    return wide.reindex(columns=[c for c in CATEGORIES if c in wide.columns])


def analyze(scores: pd.DataFrame) -> dict[str, Any]:
    if scores.empty or not (scores["metric"] == "score").any() or scores["value"].isna().all():
        return {}
    long = intervals(scores)
    return {"table_lamp_qa": paper_table(long), "lamp_qa_ci": long}
