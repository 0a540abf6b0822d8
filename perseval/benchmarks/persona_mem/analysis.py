"""PersonaMem's tables: accuracy per query type (the paper's main table: one row per system, one column
per in-situ query type, and Overall) and by distance of the evidence from the question, each mean with its
user-clustered interval (personas are the clusters).

Computed from the long frame of instance scores (perseval.benchmarks.base.ANALYSIS_COLUMNS) and the
instances; agent repeats and judge repeats of one instance are averaged first.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from perseval.benchmarks.persona_mem.layout import QUESTION_TYPES
from perseval.core.instances import Instance
from perseval.metrics.ci_tables import ci_long, instance_level

OVERALL = "Overall"
SYSTEM = ["agent", "backbone", "retriever", "judge"]
# Bins of the evidence's distance from the question, in tokens (the 32k split's contexts fit the first four).
TOKEN_BINS = (0, 2_000, 8_000, 32_000, 128_000, float("inf"))
TOKEN_LABELS = ("<2k", "2k-8k", "8k-32k", "32k-128k", ">=128k")


def _accuracy(scores: pd.DataFrame) -> pd.DataFrame:
    sub = scores[scores["metric"] == "accuracy"]
    return sub.assign(system=[" / ".join(str(v) for v in row if isinstance(v, str) and v) for row in sub[SYSTEM].itertuples(index=False)])


def distance_bin(tokens: int) -> str:
    for low, high, label in zip(TOKEN_BINS, TOKEN_BINS[1:], TOKEN_LABELS):
        if low <= tokens < high:
            return label
    return TOKEN_LABELS[-1]


def by_type(scores: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(paper table: system x query type + Overall, its long form with intervals)."""
    acc = _accuracy(scores)
    inst = instance_level(acc.rename(columns={"group": "question_type"}), ["system", "question_type"])
    long = ci_long(inst, ["system", "question_type"], overall=OVERALL)
    wide = long.pivot(index="system", columns="question_type", values="mean")
    order = [t for t in (*QUESTION_TYPES, OVERALL) if t in wide.columns]
    return wide.reindex(columns=order), long


def by_distance(scores: pd.DataFrame, instances: list[Instance]) -> pd.DataFrame:
    """Per system and distance: accuracy with its interval, by blocks and by token bins."""
    payload = {i.instance_id: i.payload for i in instances}
    acc = _accuracy(scores)
    inst = instance_level(acc, ["system"])
    inst = inst.assign(blocks=inst["instance_id"].map(lambda i: payload[i]["distance_blocks"]),
                       tokens=inst["instance_id"].map(lambda i: distance_bin(payload[i]["distance_tokens"])))
    parts = []
    for column, label in (("blocks", "sessions (blocks) back"), ("tokens", "tokens back")):
        table = ci_long(inst.assign(distance=inst[column].astype(str)), ["system", "distance"])
        rank = (table["distance"].astype(int) if column == "blocks"
                else table["distance"].map({b: i for i, b in enumerate(TOKEN_LABELS)}))
        table = table.assign(_rank=rank).sort_values(["system", "_rank"], kind="stable").drop(columns="_rank")
        parts.append(table.assign(measure=label))
    return pd.concat(parts, ignore_index=True)[["system", "measure", "distance", "mean", "ci_low", "ci_high", "se",
                                                "n", "n_users"]]


def analyze(scores: pd.DataFrame, instances: list[Instance]) -> dict[str, Any]:
    if scores.empty or not (scores["metric"] == "accuracy").any():
        return {}
    wide, long = by_type(scores)
    return {"table_accuracy_by_type": wide, "accuracy_by_type_ci": long,
            "accuracy_by_distance": by_distance(scores, instances)}
