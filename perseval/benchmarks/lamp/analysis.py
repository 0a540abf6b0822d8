"""LaMP's tables: the paper's results table (one row per system, per task its metrics: accuracy and macro F1
for LaMP-1/2, MAE and RMSE for LaMP-3, ROUGE-1 and ROUGE-L for LaMP-4..7, on the paper's scales: shares in
[0, 1] and the rating error in stars), and the long form of every per-instance mean with its user-clustered
interval (each question is a user).

Agent repeats and judge repeats of one instance are averaged first. RMSE is the root of the mean squared
error over instances; the macro F1 is computed over the task's label set from the labels answered (the
accuracy judgments' `raw`), over every repeat, as a corpus statistic with no interval.
"""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from perseval.benchmarks.lamp.layout import TASKS
from perseval.benchmarks.lamp.metrics import macro_f1
from perseval.benchmarks.lamp.views import LampGold
from perseval.core.instances import Instance
from perseval.benchmarks.profile_questions import intervals, system_labels

# per-instance metric -> (the paper's column name, the factor to its scale)
COLUMNS = {"accuracy": ("Accuracy", 0.01), "abs_error": ("MAE", 1.0), "rouge1": ("ROUGE-1", 0.01),
           "rougeL": ("ROUGE-L", 0.01)}


def f1_rows(judgments: pd.DataFrame, instances: list[Instance]) -> list[dict[str, Any]]:
    """Macro F1 per system and classification task, from the labels answered."""
    if judgments.empty or "item_id" not in judgments:
        return []
    gold = {i.instance_id: (i.group, LampGold.of(i).output) for i in instances}
    acc = judgments[(judgments["item_id"] == "accuracy") & judgments["instance_id"].isin(gold)]
    acc = acc.assign(system=system_labels(acc), task=acc["instance_id"].map(lambda i: gold[i][0]))
    rows = []
    for (system, task), sub in acc.groupby(["system", "task"], sort=False):
        golds = [gold[i][1] for i in sub["instance_id"]]
        preds = [r or None for r in sub["raw"]]
        rows.append({"system": system, "task": task, "metric": "F1", "value": macro_f1(golds, preds, TASKS[task].labels)})
    return rows


def paper_table(long: pd.DataFrame, f1: list[dict[str, Any]]) -> pd.DataFrame:
    """System x (task metric) in the paper's order and scales."""
    cells: list[dict[str, Any]] = []
    for r in long.itertuples(index=False):
        if r.metric in COLUMNS:
            name, factor = COLUMNS[r.metric]
            cells.append({"system": r.system, "column": f"{r.task} {name}", "value": r.mean * factor})
        elif r.metric == "squared_error":
            cells.append({"system": r.system, "column": f"{r.task} RMSE", "value": r.mean ** 0.5})
    cells += [{"system": r["system"], "column": f"{r['task']} F1", "value": r["value"]} for r in f1]
    if not cells:
        return pd.DataFrame()
    wide = pd.DataFrame(cells).pivot_table(index="system", columns="column", values="value", aggfunc="first")
    order = [f"{t} {m}" for t in TASKS for m in ("Accuracy", "F1", "MAE", "RMSE", "ROUGE-1", "ROUGE-L")]
    return wide.reindex(columns=[c for c in order if c in wide.columns])


def analyze(scores: pd.DataFrame, instances: list[Instance], judgments: Callable[[], pd.DataFrame]) -> dict[str, Any]:
    if scores.empty or not (scores["metric"] == "score").any():
        return {}
    long = intervals(scores)
    return {"table_lamp": paper_table(long, f1_rows(judgments(), instances)), "lamp_ci": long}


