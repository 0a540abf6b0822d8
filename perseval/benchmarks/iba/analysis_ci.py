"""Error bars of the IBA-Bench tables: intervals of Table 4's cells, paired differences of Table 5 and
Table 10, Table 9 as the paper prints it ("mean ± std"), and Table 10 per domain.

An interval of a mean over judges rests on each instance's value averaged over the judges that scored
it (each judge's agent and judge repeats averaged first), resampling users. Table 5 and Table 10 compare
systems on the same instances: paired, over the instances both scored, with p Holm-corrected across the
table's comparisons.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from perseval.benchmarks.iba.analysis_frame import OVERALL, _present, domain_order, instance_means, reorder
from perseval.metrics.differences import compare_values
from perseval.metrics.settings import StatisticsSettings
from perseval.metrics.ci_tables import ci_long
from perseval.metrics.uncertainty import holm


def system_instances(task: pd.DataFrame, by: tuple[str, ...] = ("domain",)) -> pd.DataFrame:
    """Per (system, instance): the mean over judges of each judge's instance value, with its user."""
    inst = instance_means(task, by=[*by, "user_id"])
    return inst.groupby(["system", "instance_id", *by, "user_id"], sort=False, dropna=False)["value"].mean() \
        .reset_index()


def table4_ci(task: pd.DataFrame, order: list[str], statistics: StatisticsSettings | None = None) -> pd.DataFrame:
    """Long form of Table 4 with intervals: system, domain (paper order, then Overall), mean, ci_low, ..."""
    long = ci_long(system_instances(task), ["system", "domain"], statistics, overall=OVERALL)
    cols = [*domain_order(task["domain"].dropna()), OVERALL]
    long["_s"], long["_d"] = long["system"].map({s: i for i, s in enumerate(order)}), long["domain"].map(
        {d: i for i, d in enumerate(cols)})
    return long.sort_values(["_s", "_d"]).drop(columns=["_s", "_d"]).set_index("system")


def by_preferences_ci(task: pd.DataFrame, w: int = 2, cap: int = 5,
                      statistics: StatisticsSettings | None = None) -> pd.DataFrame | None:
    """Long form of the sliding-window preference table with intervals: system, window (its label), mean,
    ci_low, ci_high, ... (the error bars of fig_by_preferences)."""
    from perseval.benchmarks.iba.analysis_slices import in_windows, window_label

    rows = task.dropna(subset=["n_constraints"])
    if rows.empty:
        return None
    copies, _ = in_windows(rows.assign(n=rows["n_constraints"].astype(int).clip(upper=cap)), w)
    long = ci_long(system_instances(copies, by=("window",)), ["system", "window"], statistics)
    return long.assign(window=[window_label(int(k), w, cap) for k in long["window"]]).set_index("system")


def paired_table(task: pd.DataFrame, pairs: list[tuple[str, str]],
                 statistics: StatisticsSettings | None = None) -> pd.DataFrame | None:
    """One row per (system, against): the Overall difference with its paired interval, Holm-corrected p
    and detectable difference."""
    if not pairs:
        return None
    st = statistics or StatisticsSettings()
    inst = system_instances(task, by=())
    values = {s: g.set_index("instance_id")[["user_id", "value"]] for s, g in inst.groupby("system", sort=False)}
    diffs = [compare_values(values[a], values[b], st, paired=True) for a, b in pairs]
    adjusted = holm([d.p_value for d in diffs])
    rows = [{"system": a, "against": b, "Δ": d.mean, "ci_low": d.ci_low, "ci_high": d.ci_high, "p (Holm)": p,
             "n_users": d.n_users, "mde": d.mde} for (a, b), d, p in zip(pairs, diffs, adjusted)]
    return pd.DataFrame(rows).set_index("system")


def ablation_pairs(table5: pd.DataFrame | None, systems: pd.DataFrame, base: str | None) -> list[tuple[str, str]]:
    """Table 5's comparisons: each ablation system against the base agent's system of the same backbone
    and retriever."""
    if table5 is None or base is None:
        return []
    sub = systems[systems["system"].isin(table5.index)]
    base_of = sub[sub["agent"] == base].set_index(["backbone", "retriever"])["system"]
    return [(s, base_of[(b, r)]) for s, a, b, r in zip(sub["system"], sub["agent"], sub["backbone"], sub["retriever"])
            if a != base and (b, r) in base_of.index]


def retriever_pairs(systems: pd.DataFrame, base: str) -> list[tuple[str, str]]:
    """Table 10's comparisons: each system under another retriever against itself under `base`."""
    with_r = systems[systems["retriever"].map(_present)]
    base_of = with_r[with_r["retriever"] == base].set_index("system_nr")["system"]
    return [(s, base_of[nr]) for s, nr, r in zip(with_r["system"], with_r["system_nr"], with_r["retriever"])
            if r != base and nr in base_of.index]


def retriever_base(systems: pd.DataFrame, params: dict[str, Any]) -> str | None:
    with_r = systems[systems["retriever"].map(_present)]
    if with_r["retriever"].nunique() < 2:
        return None
    return params.get("retriever_base") or with_r["retriever"].value_counts(sort=True).index[0]


def retriever_swap_by_domain(table4: pd.DataFrame, systems: pd.DataFrame, base: str | None) -> pd.DataFrame | None:
    """Table 10 per domain: rows = (system without retriever, retriever), and a 'Δ <retriever>' row per
    other retriever; columns = Table 4's domains and Overall."""
    if base is None:
        return None
    cols = [c for c in table4.columns if c not in ("n", "unscored")]
    with_r = systems[systems["retriever"].map(_present) & systems["system"].isin(table4.index)]
    blocks = []
    for nr, group in with_r.groupby("system_nr", sort=False):
        if group["retriever"].nunique() < 2 or base not in set(group["retriever"]):
            continue
        by_r = {r: table4.loc[s, cols] for s, r in zip(group["system"], group["retriever"])}
        rows = {(nr, base): by_r[base]} | {(nr, r): v for r, v in by_r.items() if r != base}
        rows |= {(nr, f"Δ {r}"): v - by_r[base] for r, v in by_r.items() if r != base}
        blocks.append(pd.DataFrame(rows).T)
    if not blocks:
        return None
    out = pd.concat(blocks)
    out.index.names = ["system", "retriever"]
    return out


def table9_mean_std(rows: pd.DataFrame, order: list[str], std: pd.DataFrame) -> pd.DataFrame:
    """Table 9 as the paper prints it: each cell "mean ± std" over the judge's repeats (`std`: the numeric
    table9_std_over_repeats of the same rows)."""
    inst = rows.groupby(["system", "judge_repeat", "instance_id", "domain"], sort=False)["value"].mean().reset_index()
    per_rep = inst.groupby(["system", "judge_repeat", "domain"], sort=False)["value"].mean()
    mean = per_rep.groupby(level=["system", "domain"], sort=False).mean().unstack("domain")
    mean[OVERALL] = inst.groupby(["system", "judge_repeat"], sort=False)["value"].mean().groupby(level="system").mean()
    cols = [c for c in std.columns if c != "repeats"]
    mean = reorder(mean.reindex(columns=cols), order)
    text = pd.DataFrame({c: [_pm(m, s) for m, s in zip(mean[c], std.reindex(mean.index)[c])] for c in cols},
                        index=mean.index)
    text["repeats"] = std.reindex(mean.index)["repeats"]
    text.index.name = "system"
    return text


def _pm(mean: float, std: float) -> str:
    if mean != mean:
        return ""
    return f"{mean:.1f}" if std != std else f"{mean:.1f} ± {std:.1f}"
