"""From instance scores to the tables a paper reports.

Order of averaging (as in the papers): repeats of one instance are averaged
first, then instances within a group; Overall is the mean over all instances.
An instance with no scored item is excluded from its mean and counted as unscored;
a failed agent output has no score at all and is counted beside the means
(`failed_outputs`), never as 0. Given the experiment's statistics settings, the
headline metric's mean carries its user-clustered interval and SE (perseval.metrics.uncertainty)
on the same instances, the number of users it rests on and their effective number (Kish's), with the
estimand the settings name (`weighting`: the mean over instances, or the mean of users' means).
Values enter as finite numbers or None (unscored): anything else is refused naming the cell, metric and
instance (`numeric_scores`).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from perseval.metrics.settings import StatisticsSettings
from perseval.metrics.uncertainty import cluster_mean, numbers
from perseval.core.instances import InstanceScore

OVERALL = "Overall"
COUNT_COLUMNS = ["n", "unscored_instances", "items", "unscored_items", "unscored_share", "failed_outputs"]
# of the headline metric (the first one); interval_note: why an interval is withheld
UNCERTAINTY_COLUMNS = ["ci_low", "ci_high", "se", "n_users", "effective_users", "interval_note"]


def scores_frame(scores: list[InstanceScore]) -> pd.DataFrame:
    cols = ["instance_id", "agent", "repeat", "judge", "judge_repeat", "group", "metric", "value", "n_items",
            "n_unscored", "user_id"]
    return pd.DataFrame([s.__dict__ for s in scores], columns=cols)


def numeric_scores(frame: pd.DataFrame, label: str, by: Sequence[str] = ("metric",)) -> pd.DataFrame:
    """`frame` with its `value` column as floats (NaN: unscored). A string or infinite value is refused,
    the message naming `label` (the cell), the `by` columns' values and the instance."""
    for key, sub in frame.groupby(list(by), sort=False, dropna=False):
        where = ", ".join(f"{b} {k}" for b, k in zip(by, key if isinstance(key, tuple) else (key,)))
        numbers(sub.set_index("instance_id")["value"], f"{label}, {where}")
    return frame.assign(value=numbers(frame["value"].to_numpy(dtype=object)) if len(frame) else frame["value"])


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
    """Per group and Overall: the user-clustered interval, SE, users and effective users of the mean of
    `inst["value"]` (one row per instance, with its `user_id`), weighted as `statistics.weighting` says."""
    rows = {}
    for name, sub in [*((g, inst[inst["group"] == g]) for g in groups), (OVERALL, inst)]:
        e = cluster_mean(sub["value"], sub["user_id"], level=statistics.level, weighting=statistics.weighting)
        rows[name] = {"ci_low": e.ci_low, "ci_high": e.ci_high, "se": e.se, "n_users": e.n_users,
                      "effective_users": e.effective_users, "interval_note": e.note}
    return pd.DataFrame.from_dict(rows, orient="index", columns=UNCERTAINTY_COLUMNS).astype(
        {"ci_low": float, "ci_high": float, "se": float, "n_users": int, "effective_users": float,
         "interval_note": object})


def group_means(rows: pd.DataFrame, weighting: str = "instance") -> pd.Series:
    """Per group and Overall: the mean of `value` over the instances, or (weighting "user") the mean of
    the users' means, each user's mean taken over its instances in the group (Overall: in all groups)."""
    if weighting == "instance":  # as the tables always computed it, to the last digit
        return pd.concat([rows.groupby("group")["value"].mean(), pd.Series({OVERALL: rows["value"].mean()})])
    users = rows.groupby(["group", "user_id"])["value"].mean()
    return pd.concat([users.groupby(level="group").mean(),
                      pd.Series({OVERALL: rows.groupby("user_id")["value"].mean().mean()})])


def group_table(scores: list[InstanceScore], metrics: list[str] | None = None,
                failed: Mapping[str, int] | None = None, statistics: StatisticsSettings | None = None,
                label: str = "scores") -> pd.DataFrame:
    """Rows: groups then Overall; columns: metrics (mean over instances, or with `statistics.weighting`
    "user" the mean of users' means), n, unscored_instances, items, unscored_items, unscored_share (percent
    of items), failed_outputs (`failed`: failed agent outputs per group); with `statistics`, then the
    UNCERTAINTY_COLUMNS of the headline metric (`metrics[0]`). `label` names the cell in errors."""
    inst = per_instance(numeric_scores(scores_frame(scores), label))
    weighting = statistics.weighting if statistics is not None else "instance"
    failed = {g: n for g, n in (failed or {}).items() if n}
    if inst.empty and not failed:
        return pd.DataFrame()
    metrics = metrics or sorted(inst["metric"].unique())
    groups = sorted(set(inst["group"]) | set(failed))
    table = pd.DataFrame(index=[*groups, OVERALL])
    for m in metrics:
        rows = inst[inst["metric"] == m]
        if not rows.empty:
            table[m] = group_means(rows, weighting)
    if metrics:
        table = table.join(_counts(inst[inst["metric"] == metrics[0]]))
    table[COUNT_COLUMNS[:4]] = table.reindex(columns=COUNT_COLUMNS[:4]).fillna(0).astype(int)
    table["unscored_share"] = (100.0 * table["unscored_items"] / table["items"].where(table["items"] > 0)).round(1)
    table["failed_outputs"] = [failed.get(g, 0) for g in groups] + [sum(failed.values())]
    if statistics is not None and metrics:
        table = table.join(intervals(inst[inst["metric"] == metrics[0]], groups, statistics))
    table.index.name = "group"
    return table
