"""Where a cell's uncertainty comes from: user/instance sampling, agent sampling and judge noise.

With R agent repeats per instance and K judge repeats per answer, a cell's mean over n instances has
variance SE^2 (cluster-robust over users, on the per-instance means). Its parts, by the method of moments
on the nested design:
  judge noise     s2_judge / (n R K), s2_judge: the variance between judge repeats of one answer;
  agent sampling  s2_agent / (n R),   s2_agent: the variance between agent repeats of one instance, less
                  what judge noise alone puts there (s2_judge / K);
  user/instance   what is left of SE^2: more users shrink it, more repeats do not.
A share near 100% for users says: spend compute on more users, not on repeats. Where one run is scored
by several judges, the spread of its cell means across judges is shown beside (`between_judges_sd`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from perseval.metrics.uncertainty import cluster_se

COLUMNS = ["n", "n_users", "agent_repeats", "judge_repeats", "mean", "se", "se2_users", "se2_agent", "se2_judge",
           "share_users", "share_agent", "share_judge", "between_judges_sd", "n_judges"]
RUN = ["agent", "backbone", "retriever"]


def _within_var(frame: pd.DataFrame, by: list[str]) -> float:
    """Mean within-group sample variance of `value` (groups with at least two values)."""
    var = frame.groupby(by)["value"].var(ddof=1).dropna()
    return float(var.mean()) if len(var) else 0.0


def cell_components(frame: pd.DataFrame) -> dict[str, float | int | None]:
    """One cell's decomposition from its rows (instance_id, user_id, repeat, judge_repeat, value)."""
    frame = frame.dropna(subset=["value"])
    answers = frame.groupby(["instance_id", "repeat"], as_index=False).agg(value=("value", "mean"))
    inst = frame.groupby("instance_id").agg(value=("value", "mean"), user_id=("user_id", "first"))
    n = len(inst)
    reps = int(frame.groupby("instance_id")["repeat"].nunique().max()) if n else 0
    jreps = int(frame.groupby(["instance_id", "repeat"])["judge_repeat"].nunique().max()) if n else 0
    se = cluster_se(inst["value"].tolist(), inst["user_id"].tolist()) if n else None
    s2_judge = _within_var(frame, ["instance_id", "repeat"]) if jreps > 1 else 0.0
    s2_agent = max(0.0, _within_var(answers, ["instance_id"]) - s2_judge / max(jreps, 1)) if reps > 1 else 0.0
    out: dict[str, float | int | None] = {"n": n, "n_users": int(inst["user_id"].nunique()), "agent_repeats": reps,
                                          "judge_repeats": jreps, "mean": float(inst["value"].mean()) if n else None,
                                          "se": se}
    if se is None:
        return out | {k: None for k in COLUMNS[6:12]}
    judge = s2_judge / (n * reps * jreps)
    agent = s2_agent / (n * reps)
    total = se ** 2
    users = max(0.0, total - agent - judge)
    parts = users + agent + judge
    shares = [100 * v / parts if parts > 0 else None for v in (users, agent, judge)]
    return out | dict(zip(COLUMNS[6:12], [users, agent, judge, *shares]))


def variance_components(scores: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per cell of one benchmark (rows indexed by cell), on `metric`: the parts of its SE^2 and their shares,
    and the spread across judges of the same run. Empty when no cell has repeats or a second judge."""
    rows = scores[scores["metric"] == metric]
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    if "user_id" not in rows or rows["user_id"].isna().all():
        rows = rows.assign(user_id=rows["instance_id"])
    table = pd.DataFrame.from_dict({cell: cell_components(sub) for cell, sub in rows.groupby("cell")},
                                   orient="index")
    ids = rows.drop_duplicates("cell").set_index("cell")
    means = table["mean"]
    spread = {}
    for _, cells in ids.groupby(RUN).groups.items():
        judged = means.reindex(cells).dropna()
        for c in cells:
            spread[c] = (float(np.std(judged, ddof=1)) if len(judged) > 1 else None, len(judged))
    table["between_judges_sd"] = [spread[c][0] for c in table.index]
    table["n_judges"] = [spread[c][1] for c in table.index]
    if (table["agent_repeats"] <= 1).all() and (table["judge_repeats"] <= 1).all() and (table["n_judges"] <= 1).all():
        return pd.DataFrame(columns=COLUMNS)
    table.index.name = "cell"
    return table[COLUMNS]
