"""The section 5.3 analyses of IBA-Bench: evidence, preferences (sliding window), dynamics, QA vs task.

Every cell is a headline score: per judge, the mean over the slice's instances (each instance first
averaged over agent and judge repeats), then the mean over judges.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from perseval.benchmarks.iba.analysis_frame import UNSCORED, headline, instance_means, reorder, unscored_count


def count_label(n: int, cap: int) -> str:
    """'1', '2', ..., and 'cap+' for cap or more (the 5+ of Table 2)."""
    return f"{n}+" if n >= cap else str(n)


def by_evidence(task: pd.DataFrame, order: list[str], cap: int = 5) -> pd.DataFrame | None:
    """Rows = systems; columns = evidence buckets '1'..'4', '5+' (present ones), then unscored."""
    rows = task.dropna(subset=["n_evidence"])
    if rows.empty:
        return None
    rows = rows.assign(evidence=rows["n_evidence"].astype(int).clip(upper=cap))
    inst = instance_means(rows, by=["evidence"])
    table = headline(inst, "evidence", order, columns=sorted(inst["evidence"].unique()))
    table.columns = [count_label(int(c), cap) for c in table.columns]
    table[UNSCORED] = unscored_count(rows, order)
    return table


def window_starts(counts: pd.Series, w: int) -> list[int]:
    """Start k of every full window [k, k+w-1] inside [min, max] of the counts (one window if narrower)."""
    lo, hi = int(counts.min()), int(counts.max())
    return list(range(lo, max(lo, hi - w + 1) + 1))


def window_label(k: int, w: int, cap: int) -> str:
    return count_label(k, cap) if w == 1 else f"{count_label(k, cap)}-{count_label(k + w - 1, cap)}"


def in_windows(rows: pd.DataFrame, w: int) -> tuple[pd.DataFrame, list[int]]:
    """Each row (with its capped count `n`) once per sliding window it falls in (`window`: the window's
    start; a count n belongs to the windows that start at n-w+1 .. n), and the windows' starts."""
    starts = window_starts(rows["n"], w)
    copies = pd.concat([rows.assign(window=rows["n"] - offset) for offset in range(w)], ignore_index=True)
    return copies[copies["window"].isin(starts)], starts


def by_preferences(task: pd.DataFrame, order: list[str], w: int = 2, cap: int = 5) -> pd.DataFrame | None:
    """Score vs number of preferences (n_constraints), smoothed by a sliding window of width w.

    Counts are first capped at `cap` (n >= cap counts as cap, the '5+' bucket). Window k covers the
    instances with k <= n <= k + w - 1, for k = min(n) .. max(n) - w + 1 (every window full; a single
    window k = min(n) when the range is narrower than w). An instance therefore falls into up to w
    windows. A window's score pools its instances: per judge the mean over all of them (each instance
    weighs the same, as in Overall), then the mean over judges. With w = 2 and n in 1..5+ the columns
    are '1-2', '2-3', '3-4', '4-5+'; then unscored.
    """
    rows = task.dropna(subset=["n_constraints"])
    if rows.empty:
        return None
    rows = rows.assign(n=rows["n_constraints"].astype(int).clip(upper=cap))
    copies, starts = in_windows(instance_means(rows, by=["n"]), w)
    table = headline(copies, "window", order, columns=starts)
    table.columns = [window_label(int(k), w, cap) for k in table.columns]
    table[UNSCORED] = unscored_count(rows, order)
    return table


def static_vs_dynamic(task: pd.DataFrame, order: list[str]) -> pd.DataFrame | None:
    """Rows = systems; columns Static, Dynamic, 'Dynamic - Static', unscored. None unless both kinds exist."""
    rows = task.dropna(subset=["dynamic"])
    if rows.empty or rows["dynamic"].astype(bool).nunique() < 2:
        return None
    rows = rows.assign(kind=np.where(rows["dynamic"].astype(bool), "Dynamic", "Static"))
    inst = instance_means(rows, by=["kind"])
    table = headline(inst, "kind", order, columns=["Static", "Dynamic"])
    table["Dynamic - Static"] = table["Dynamic"] - table["Static"]
    table[UNSCORED] = unscored_count(rows, order)
    return table


def qa_vs_task(task: pd.DataFrame, qa: pd.DataFrame, order: list[str]) -> pd.DataFrame | None:
    """The knowledge-to-action gap on paired instances: QA probe twin vs the task it was made from.

    Pairs are (system, judge, base instance) where both the QA twin and the task have a value; per
    judge QA and Task are the means over the pairs, then the mean over judges; Gap = QA - Task.
    Columns QA, Task, Gap, n (paired base instances), unscored (QA rows and twinned task rows with
    no value). None without QA rows or pairs.
    """
    if qa.empty or qa["base_instance"].isna().all():
        return None
    qa_inst = instance_means(qa, by=["base_instance"])
    task_inst = instance_means(task)
    pairs = qa_inst.merge(task_inst, left_on=["system", "judge", "base_instance"],
                          right_on=["system", "judge", "instance_id"], suffixes=("_qa", "_task"))
    pairs = pairs.dropna(subset=["value_qa", "value_task"])
    if pairs.empty:
        return None
    per_judge = pairs.groupby(["system", "judge"], sort=False)[["value_qa", "value_task"]].mean()
    table = per_judge.groupby(level="system", sort=False).mean().set_axis(["QA", "Task"], axis=1)
    table["Gap"] = table["QA"] - table["Task"]
    table["n"] = pairs.groupby("system")["base_instance"].nunique()
    twinned = task[task["instance_id"].isin(qa["base_instance"])]
    table[UNSCORED] = unscored_count(qa, order).add(unscored_count(twinned, order), fill_value=0).astype(int)
    table.index.name = "system"
    return reorder(table, order)
