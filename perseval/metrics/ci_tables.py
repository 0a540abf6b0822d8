"""Companion interval tables of the analysis stage: every mean an analysis table shows, with its
user-clustered interval, in long form (one row per system/cell x column), so a paper table's cell can be
looked up with its error bar beside it.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import pandas as pd

from perseval.metrics.settings import StatisticsSettings
from perseval.metrics.aggregate import OVERALL, numeric_scores
from perseval.metrics.uncertainty import cluster_mean
from perseval.metrics.variance import variance_components
from perseval.core.instances import Instance

CI_COLUMNS = ["mean", "ci_low", "ci_high", "se", "n", "n_users", "effective_users"]


CLUSTER = "cluster"  # Instance.gold key: the user an instance's interval clusters by, where not its user_id


def cluster_of(instance: Instance) -> str:
    """The unit of independence of `instance`: `gold["cluster"]` where the benchmark
    names one, else its user. IBA's constructed instances each own their history (so its gold rests on
    its own evidence) but share one of 400 seed personas: the persona is the user that repeats, and the
    cluster (docs/protocols/iba.md). Gold, not payload: no agent sees it, so no prompt changes."""
    gold = instance.gold if isinstance(instance.gold, dict) else {}
    return str(gold.get(CLUSTER) or instance.user_id)


def with_users(frame: pd.DataFrame, instances: Iterable[Instance]) -> pd.DataFrame:
    """`frame` with a `user_id` on every row: its own, else the instance's cluster (`cluster_of`), else the
    instance id (a row whose user is unknown is its own cluster)."""
    users = {i.instance_id: cluster_of(i) for i in instances}
    own = frame["user_id"] if "user_id" in frame else pd.Series(None, index=frame.index, dtype=object)
    own = own.astype(object)
    known = own.where(own.notna() & own.astype(str).ne(""), frame["instance_id"].map(users).astype(object))
    return frame.assign(user_id=known.where(known.notna(), frame["instance_id"].astype(object)))


def ci_long(inst: pd.DataFrame, by: Sequence[str], statistics: StatisticsSettings | None = None,
            overall: str | None = None) -> pd.DataFrame:
    """One row per combination of `by`: the mean of `value` over its rows (one per instance, with
    `user_id`; the mean of users' means where `statistics.weighting` is "user") and its user-clustered
    interval, with the users and effective users it rests on. `overall`: also the rows with the last `by` column set to
    this label, over all of its values (a table's Overall column)."""
    st = statistics or StatisticsSettings()
    parts = [inst]
    if overall is not None:
        parts.append(inst.assign(**{by[-1]: overall}))
    rows: list[dict[str, Any]] = []
    for key, sub in pd.concat(parts, ignore_index=True).groupby(list(by), sort=False, dropna=False):
        e = cluster_mean(sub["value"].tolist(), sub["user_id"].tolist(), level=st.level, weighting=st.weighting)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "mean": e.mean, "ci_low": e.ci_low, "ci_high": e.ci_high, "se": e.se,
                     "n": e.n, "n_users": e.n_users, "effective_users": e.effective_users})
    return pd.DataFrame(rows, columns=[*by, *CI_COLUMNS])


def instance_level(scores: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per (by..., instance): the mean over agent repeats and judge repeats, with the instance's user."""
    keys = [*by, "instance_id"]
    return scores.groupby(keys, sort=False, dropna=False).agg(value=("value", "mean"),
                                                               user_id=("user_id", "first")).reset_index()


def uncertainty_tables(scores: pd.DataFrame, instances: Iterable[Instance], headline_metric: str | None,
                       statistics: StatisticsSettings) -> dict[str, pd.DataFrame]:
    """The analysis stage's tables for every benchmark: `scores_ci` (every cell x metric x group and
    Overall, with its interval) and, where a cell has repeats or several judges, `variance_components`."""
    if scores.empty:
        return {}
    scores = with_users(numeric_scores(scores, "analysis scores", ("cell", "metric")), instances)
    inst = instance_level(scores, ["cell", "metric", "group"])
    out = {"scores_ci": ci_long(inst, ["cell", "metric", "group"], statistics, overall=OVERALL)
           .sort_values(["cell", "metric"], kind="stable").set_index("cell")}
    if headline_metric is not None:
        variance = variance_components(scores, headline_metric)
        if not variance.empty:
            out["variance_components"] = variance
    return out
