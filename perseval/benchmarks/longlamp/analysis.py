"""LongLaMP's tables: the paper's results table (one row per system; per task its ROUGE-1 and ROUGE-L on the
paper's [0, 1] scale) and the long form of every per-row mean with its user-clustered interval (each row is
a user). Agent and judge repeats of one row are averaged first (profile_questions.intervals). METEOR, the
paper's third metric, is not computed (docs/protocols/longlamp.md)."""
from __future__ import annotations

from typing import Any

import pandas as pd

from perseval.benchmarks.longlamp.layout import TASKS
from perseval.benchmarks.profile_questions import intervals

COLUMNS = {"rouge1": "ROUGE-1", "rougeL": "ROUGE-L"}  # per-row metric -> the paper's column name


def paper_table(long: pd.DataFrame) -> pd.DataFrame:
    """System x (task metric), in the paper's task order, each mean / 100."""
    sub = long[long["metric"].isin(list(COLUMNS))]
    if sub.empty:
        return pd.DataFrame()
    sub = sub.assign(column=[f"{TASKS[t].paper} {COLUMNS[m]}" for t, m in zip(sub["task"], sub["metric"])],
                     value=sub["mean"] / 100.0)
    wide = sub.pivot_table(index="system", columns="column", values="value", aggfunc="first")
    order = [f"{t.paper} {name}" for t in TASKS.values() for name in COLUMNS.values()]
    return wide.reindex(columns=[c for c in order if c in wide.columns])


def analyze(scores: pd.DataFrame) -> dict[str, Any]:
    if scores.empty or not (scores["metric"] == "score").any():
        return {}
    long = intervals(scores)
    return {"table_longlamp": paper_table(long), "longlamp_ci": long}
