"""From instance scores to the tables a paper reports.

Order of averaging (as in the papers): repeats of one instance are averaged
first, then instances within a group; Overall is the mean over all instances.
An instance with no scored item is excluded from its mean and counted as unscored;
a failed agent output has no score at all and is counted beside the means
(`failed_outputs`), never as 0.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from perseval.records import InstanceScore

OVERALL = "Overall"
COUNT_COLUMNS = ["n", "unscored_instances", "items", "unscored_items", "unscored_share", "failed_outputs"]


def scores_frame(scores: list[InstanceScore]) -> pd.DataFrame:
    cols = ["instance_id", "agent", "repeat", "judge", "judge_repeat", "group", "metric", "value", "n_items",
            "n_unscored"]
    return pd.DataFrame([s.__dict__ for s in scores], columns=cols)


def per_instance(df: pd.DataFrame) -> pd.DataFrame:
    """Mean over agent repeats and judge repeats of each (instance, metric)."""
    return (df.groupby(["instance_id", "group", "metric"], as_index=False)
              .agg(value=("value", "mean"), n_items=("n_items", "sum"), n_unscored=("n_unscored", "sum")))


def _counts(sub: pd.DataFrame) -> pd.DataFrame:
    """Per group: instances, unscored instances, items and unscored items of the headline metric."""
    counts = sub.groupby("group").agg(n=("instance_id", "nunique"),
                                      unscored_instances=("value", lambda v: int(v.isna().sum())),
                                      items=("n_items", "sum"), unscored_items=("n_unscored", "sum"))
    counts.loc[OVERALL] = [sub["instance_id"].nunique(), int(sub["value"].isna().sum()), int(sub["n_items"].sum()),
                           int(sub["n_unscored"].sum())]
    return counts


def group_table(scores: list[InstanceScore], metrics: list[str] | None = None,
                failed: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Rows: groups then Overall; columns: metrics (mean), n, unscored_instances, items, unscored_items,
    unscored_share (percent of items), failed_outputs (`failed`: failed agent outputs per group)."""
    inst = per_instance(scores_frame(scores))
    failed = {g: n for g, n in (failed or {}).items() if n}
    if inst.empty and not failed:
        return pd.DataFrame()
    metrics = metrics or sorted(inst["metric"].unique())
    groups = sorted(set(inst["group"]) | set(failed))
    table = pd.DataFrame(index=[*groups, OVERALL])
    for m in metrics:
        rows = inst[inst["metric"] == m]
        if not rows.empty:
            table[m] = pd.concat([rows.groupby("group")["value"].mean(), pd.Series({OVERALL: rows["value"].mean()})])
    if metrics:
        table = table.join(_counts(inst[inst["metric"] == metrics[0]]))
    table[COUNT_COLUMNS[:4]] = table.reindex(columns=COUNT_COLUMNS[:4]).fillna(0).astype(int)
    table["unscored_share"] = (100.0 * table["unscored_items"] / table["items"].where(table["items"] > 0)).round(1)
    table["failed_outputs"] = [failed.get(g, 0) for g in groups] + [sum(failed.values())]
    table.index.name = "group"
    return table
