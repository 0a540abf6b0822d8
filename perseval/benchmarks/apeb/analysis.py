"""APeB's cross-cell analyses: the paper's results table, per category, invalid outputs, the rubric analysis,
and the dataset statistics of the mined cases, logged as run artifacts.

The paper's layout: one row per system, one column per (query level x candidate set) cell - intent /
random, intent / hard, refined / random, refined / hard - for Hit@1 (the headline), Hit@5 and MRR. Each
instance's value is first averaged over repeats; a cell's value is the mean over its instances. A
system is the agent, with its backbone (and retriever) named when the experiment has several.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from perseval.benchmarks.apeb.judges.rubric import CRITERIA
from perseval.benchmarks.apeb.stats import OVERALL, dataset_tables
from perseval.benchmarks.apeb.views import ApebPayload
from perseval.benchmarks.plots import grouped_bars
from perseval.metrics.ci_tables import ci_long, with_users
from perseval.core.instances import Instance

RANK_METRICS = ("hit@1", "hit@5", "mrr")
LEVEL_ORDER = ("intent", "refined")

if TYPE_CHECKING:  # matplotlib is imported by the plots themselves, not by validation
    from matplotlib.figure import Figure

Result = dict[str, "pd.DataFrame | Figure"]


def file_name(metric: str) -> str:
    return metric.replace("@", "_at_")


def _systems(frame: pd.DataFrame) -> pd.Series:
    """The system label of each row: the agent, plus backbone / retriever when the experiment varies them."""
    label = frame["agent"].astype(str)
    for col in ("backbone", "retriever"):
        if frame.loc[frame[col] != "-", col].nunique() > 1:
            label = label + frame[col].map(lambda v: "" if v == "-" else f" [{v}]")
    return label


def _cell_order(sets: list[str]) -> list[str]:
    # the paper's column order: random before hard; opt-in variants after their base set
    return sorted(sets, key=lambda s: (not s.startswith("random"), s))


def prepare(scores: pd.DataFrame, instances: list[Instance]) -> pd.DataFrame:
    """One row per (system, judge, instance, metric): the mean over repeats, with the instance's cell."""
    cells = [(i.instance_id, ApebPayload.of(i)) for i in instances]
    meta = pd.DataFrame([{"instance_id": iid, "query_level": v.query_level, "candidate_set": v.candidate_set}
                         for iid, v in cells])
    frame = with_users(scores.assign(system=_systems(scores)), instances).merge(meta, on="instance_id", how="left")
    keys = ["system", "judge", "instance_id", "user_id", "group", "query_level", "candidate_set", "metric"]
    return frame.groupby(keys, sort=False, dropna=False).agg(value=("value", "mean"),
                                                             n_unscored=("n_unscored", "sum")).reset_index()


def results_table(rank: pd.DataFrame, metric: str, order: list[str]) -> pd.DataFrame:
    """The paper's table for one metric: systems x (query level / candidate set)."""
    rows = rank[rank["metric"] == metric]
    table = rows.pivot_table(index="system", columns=["query_level", "candidate_set"], values="value",
                             aggfunc="mean", sort=False)
    levels = [lv for lv in LEVEL_ORDER if lv in table.columns.get_level_values(0)]
    sets = _cell_order(list(table.columns.get_level_values(1).unique()))
    cols = [(lv, cs) for lv in levels for cs in sets if (lv, cs) in table.columns]
    table = table.reindex(index=order, columns=cols)
    table.columns = [f"{lv} / {cs}" for lv, cs in cols]
    table.index.name = "system"
    return table


def results_ci(rank: pd.DataFrame, metric: str, order: list[str]) -> pd.DataFrame:
    """results_table's cells with their intervals (users resampled), long: system, cell, mean, ci_low, ..."""
    rows = rank[rank["metric"] == metric]
    rows = rows.assign(cell=rows["query_level"].astype(str) + " / " + rows["candidate_set"].astype(str))
    inst = rows.groupby(["system", "cell", "instance_id"], sort=False).agg(
        value=("value", "mean"), user_id=("user_id", "first")).reset_index()
    long = ci_long(inst, ["system", "cell"])
    long["_s"] = long["system"].map({s: i for i, s in enumerate(order)})
    return long.sort_values(["_s", "cell"], kind="stable").drop(columns="_s").set_index("system")


def _bounds(ci: pd.DataFrame, like: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    long = ci.reset_index()
    return tuple(long.pivot_table(index="system", columns="cell", values=v, aggfunc="first", dropna=False)
                 .reindex(index=like.index, columns=like.columns) for v in ("ci_low", "ci_high"))  # type: ignore


def cells_long(rank: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Every metric of every (system, cell), with n and the invalid outputs (those with valid = 0)."""
    wide = rank.pivot_table(index=["system", "query_level", "candidate_set", "instance_id"], columns="metric",
                            values="value", aggfunc="mean").reset_index()
    agg = {m: (m, "mean") for m in RANK_METRICS if m in wide}
    agg["n"] = ("instance_id", "nunique")
    table = wide.groupby(["system", "query_level", "candidate_set"], sort=False).agg(**agg)
    if "valid" in wide:
        invalid = wide.assign(invalid=wide["valid"] < 100).groupby(["system", "query_level", "candidate_set"],
                                                                    sort=False)["invalid"].sum()
        table["invalid"] = invalid.astype(int)
    return table.reindex(order, level=0)


def invalid_table(rank: pd.DataFrame, order: list[str]) -> pd.DataFrame | None:
    """Invalid (or failed) outputs per system: counted, and as a share of its outputs."""
    valid = rank[rank["metric"] == "valid"]
    if valid.empty:
        return None
    grouped = valid.groupby("system", sort=False)["value"]
    table = pd.DataFrame({"outputs": grouped.size(), "invalid": grouped.apply(lambda v: int((v < 100).sum()))})
    table["invalid_%"] = 100.0 * table["invalid"] / table["outputs"]
    return table.reindex(order)


def by_category(rank: pd.DataFrame, metric: str, order: list[str]) -> pd.DataFrame:
    """One metric per category (columns, then Overall) for each system and cell (rows)."""
    rows = rank[rank["metric"] == metric]
    keys = ["system", "query_level", "candidate_set"]
    table = rows.pivot_table(index=keys, columns="group", values="value", aggfunc="mean", sort=False)
    table[OVERALL] = rows.groupby(keys, sort=False)["value"].mean()
    return table.reindex(order, level=0)


def rubric_tables(rubric: pd.DataFrame, order: list[str]) -> Result:
    """Per rubric judge: each criterion's mean (1-5) per system and query level, with n and unscored."""
    out: Result = {}
    for judge, rows in rubric.groupby("judge", sort=False):
        scored = rows.pivot_table(index=["system", "query_level"], columns="metric", values="value",
                                  aggfunc="mean", sort=False)
        scored = scored.reindex(columns=[c for c in CRITERIA if c in scored.columns])
        counts = rows.groupby(["system", "query_level"], sort=False).agg(
            n=("instance_id", "nunique"), unscored=("value", lambda v: int(v.isna().sum())))
        table = scored.join(counts, how="outer").reindex([s for s in order if s in set(rows["system"])], level=0)
        out[f"rubric_{_safe(judge)}"] = table
        means = rows.pivot_table(index="system", columns="metric", values="value", aggfunc="mean", sort=False)
        if not means.empty:
            ordered = means.reindex(columns=[c for c in CRITERIA if c in means]).T
            out[f"fig_rubric_{_safe(judge)}"] = grouped_bars(ordered, f"Rubric analysis ({judge})", "Criterion",
                                                             "Mean rating (1-5)")
    return out


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(text)).strip("_") or "judge"


def analyze(scores: pd.DataFrame, instances: list[Instance]) -> Result:
    """name -> DataFrame or Figure (see the module docstring); the dataset tables always."""
    out: Result = dict(dataset_tables(instances))
    if scores is None or scores.empty:
        return out
    frame = prepare(scores, instances)
    order = list(dict.fromkeys(frame["system"]))
    rank = frame[frame["metric"].isin((*RANK_METRICS, "valid"))]
    if not rank.empty:
        for metric in RANK_METRICS:
            out[f"table_{file_name(metric)}"] = results_table(rank, metric, order)
            out[f"table_{file_name(metric)}_ci"] = results_ci(rank, metric, order)
        out["table_cells"] = cells_long(rank, order)
        out["by_category_hit_at_1"] = by_category(rank, "hit@1", order)
        invalid = invalid_table(rank, order)
        if invalid is not None:
            out["invalid_outputs"] = invalid
        out["fig_hit_at_1"] = grouped_bars(out["table_hit_at_1"], "Hit@1 by query level / candidate set "
                                           "(95% intervals over users)", "Query level / candidate set", "Hit@1 (%)",
                                           errors=_bounds(out["table_hit_at_1_ci"], out["table_hit_at_1"]))
    rubric = frame[frame["metric"].isin(CRITERIA)]
    if not rubric.empty:
        out.update(rubric_tables(rubric, order))
    return out
