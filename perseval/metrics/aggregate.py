"""From instance scores to the tables a paper reports.

Order of averaging (as in the papers): repeats of one instance are averaged
first, then instances within a group; Overall is the mean over all instances.
An instance with no scored item is excluded from its mean and counted as unscored;
a failed agent output has no score at all and is counted beside the means
(`failed_outputs`), never as 0. Given the experiment's statistics settings, the
headline metric's mean carries its user-clustered interval and SE (perseval.metrics.uncertainty)
on the same instances, and the number of users it rests on.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from perseval.metrics.settings import StatisticsSettings
from perseval.metrics.uncertainty import cluster_mean
from perseval.core.records import InstanceScore

OVERALL = "Overall"
COUNT_COLUMNS = ["n", "unscored_instances", "items", "unscored_items", "unscored_share", "failed_outputs"]
UNCERTAINTY_COLUMNS = ["ci_low", "ci_high", "se", "n_users"]  # of the headline metric (the first one)


def scores_frame(scores: list[InstanceScore]) -> pd.DataFrame:
    cols = ["instance_id", "agent", "repeat", "judge", "judge_repeat", "group", "metric", "value", "n_items",
            "n_unscored", "user_id"]
    return pd.DataFrame([s.__dict__ for s in scores], columns=cols)


def per_instance(df: pd.DataFrame) -> pd.DataFrame:
    """Mean over agent repeats and judge repeats of each (instance, metric)."""
    return (df.groupby(["instance_id", "group", "metric"], as_index=False)
              .agg(value=("value", "mean"), n_items=("n_items", "sum"), n_unscored=("n_unscored", "sum"),
                   user_id=("user_id", "first")))


def _counts(sub: pd.DataFrame) -> pd.DataFrame:
    """Per group: instances, unscored instances, items and unscored items of the headline metric."""
    counts = sub.groupby("group").agg(n=("instance_id", "nunique"),
                                      unscored_instances=("value", lambda v: int(v.isna().sum())),
                                      items=("n_items", "sum"), unscored_items=("n_unscored", "sum"))
    counts.loc[OVERALL] = [sub["instance_id"].nunique(), int(sub["value"].isna().sum()), int(sub["n_items"].sum()),
                           int(sub["n_unscored"].sum())]
    return counts


def intervals(inst: pd.DataFrame, groups: list[str], statistics: StatisticsSettings) -> pd.DataFrame:
    """Per group and Overall: the user-clustered interval, SE and users of the mean of `inst["value"]`
    (one row per instance, with its `user_id`)."""
    rows = {}
    for name, sub in [*((g, inst[inst["group"] == g]) for g in groups), (OVERALL, inst)]:
        e = cluster_mean(sub["value"], sub["user_id"], level=statistics.level, resamples=statistics.resamples,
                         seed=statistics.seed)
        rows[name] = {"ci_low": e.ci_low, "ci_high": e.ci_high, "se": e.se, "n_users": e.n_users}
    return pd.DataFrame.from_dict(rows, orient="index", columns=UNCERTAINTY_COLUMNS).astype(
        {"ci_low": float, "ci_high": float, "se": float, "n_users": int})


def group_table(scores: list[InstanceScore], metrics: list[str] | None = None,
                failed: Mapping[str, int] | None = None, statistics: StatisticsSettings | None = None) -> pd.DataFrame:
    """Rows: groups then Overall; columns: metrics (mean), n, unscored_instances, items, unscored_items,
    unscored_share (percent of items), failed_outputs (`failed`: failed agent outputs per group); with
    `statistics`, then ci_low, ci_high, se and n_users of the headline metric (`metrics[0]`)."""
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
    if statistics is not None and metrics:
        table = table.join(intervals(inst[inst["metric"] == metrics[0]], groups, statistics))
    table.index.name = "group"
    return table
