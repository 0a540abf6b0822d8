"""From instance scores to the tables a paper reports.

Order of averaging (as in the papers): repeats of one instance are averaged
first, then instances within a group; Overall is the mean over all instances.
An instance with no scored item is excluded from its mean and counted as unscored.
"""
from __future__ import annotations

import pandas as pd

from perseval.records import InstanceScore

OVERALL = "Overall"


def scores_frame(scores: list[InstanceScore]) -> pd.DataFrame:
    cols = ["instance_id", "agent", "repeat", "judge", "judge_repeat", "group", "metric", "value", "n_items",
            "n_unscored"]
    return pd.DataFrame([s.__dict__ for s in scores], columns=cols)


def per_instance(df: pd.DataFrame) -> pd.DataFrame:
    """Mean over agent repeats and judge repeats of each (instance, metric)."""
    return (df.groupby(["instance_id", "group", "metric"], as_index=False)
              .agg(value=("value", "mean"), n_items=("n_items", "sum"), n_unscored=("n_unscored", "sum")))


def group_table(scores: list[InstanceScore], metrics: list[str] | None = None) -> pd.DataFrame:
    """Rows: groups then Overall; columns: metrics (mean), n, unscored_instances, unscored_items."""
    df = scores_frame(scores)
    if df.empty:
        return pd.DataFrame()
    inst = per_instance(df)
    metrics = metrics or sorted(inst["metric"].unique())
    means = inst.pivot_table(index="group", columns="metric", values="value", aggfunc="mean")
    overall = inst.groupby("metric")["value"].mean().rename(OVERALL)
    table = pd.concat([means, overall.to_frame().T])
    table = table.reindex(columns=[m for m in metrics if m in table.columns])
    headline_metric = metrics[0]
    sub = inst[inst["metric"] == headline_metric]
    counts = sub.groupby("group").agg(n=("instance_id", "nunique"),
                                      unscored_instances=("value", lambda v: int(v.isna().sum())),
                                      unscored_items=("n_unscored", "sum"))
    counts.loc[OVERALL] = [sub["instance_id"].nunique(), int(sub["value"].isna().sum()), int(sub["n_unscored"].sum())]
    table = table.join(counts)
    table.index.name = "group"
    return table
