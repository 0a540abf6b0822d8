"""`custom`: a researcher's own personalization data, in the generic layout of docs/custom-data-layout.md.

The entry's `source:` is a folder with `instances` and `histories` (JSON Lines or
Parquet). It is read and checked as a release folder (perseval.benchmarks.release_folder)
with this layout's rows (perseval.benchmarks.custom.rows), then `sample:` instances are
kept as for an IBA release (seeded, in file order). Free-text instances are judged by
`custom.checkpoint` (a judge YAML without `kind` binds its model to it), API calls by
`custom.slots` and rankings by `custom.ranking`, both rule judges applied by default.

The run's analysis logs `scores_by_type_and_group` (each cell's metrics split by instance type and group,
with n and unscored items) and the dataset tables of `stats`, so a run on one's own data has more than
the headline.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from perseval.benchmarks.base import AnalysisInputs, Benchmark, BenchmarkData
from perseval.benchmarks.custom.answers import API, RANKING, TEXT, TYPE_NAMES, CustomFormat, action_type
from perseval.benchmarks.custom.rows import instance_row, turn_row
from perseval.benchmarks.release_folder import Layout
from perseval.core.errors import InputError
from perseval.core.instances import Document, Instance
from perseval.kernel.registry import register_benchmark
from perseval.benchmarks.custom.views import CustomGold, CustomPayload
from perseval.benchmarks.views import RankingPayload
from perseval.benchmarks.probes import KnownItem, checkpoint_items

LAYOUT_DOC = "see docs/custom-data-layout.md for the layout of a user's own data"


def scored_items(instance: Instance) -> int:
    """How many items an instance is scored on: checkpoints, gold slots or candidates."""
    kind, gold = action_type(instance), CustomGold.of(instance)
    if kind == TEXT:
        return len(gold.checkpoints or [])
    if kind == API:
        return len(gold.slots or {})
    return len(RankingPayload.of(instance).candidates)


def data_info(folder: Path, instances: list[Instance], documents: list[Document], n_users: int) -> dict[str, Any]:
    return {"source": str(folder), "n_instances": len(instances), "n_users": len({i.user_id for i in instances}),
            "n_users_in_histories": n_users, "n_documents": len(documents),
            "n_evidence": sum(1 for d in documents if d.meta.get("supports")),
            "by_group": dict(Counter(i.group for i in instances)),
            "by_type": dict(Counter(TYPE_NAMES[action_type(i)] for i in instances))}


CUSTOM_LAYOUT = Layout(instance_row, turn_row, data_info, LAYOUT_DOC)


def load_custom(source: Path) -> BenchmarkData:
    """Every instance and the histories of their users, checked row by row."""
    return CUSTOM_LAYOUT.load(source)


@register_benchmark("custom")
class CustomBenchmark(Benchmark):
    Payload, Gold = CustomPayload, CustomGold
    headline_metric = "score"  # free text and API calls; a ranking cell's headline is its judge's first, hit@1
    group_label = "group"
    llm_judges = ("custom.checkpoint",)
    rule_judges = ("custom.slots", "custom.ranking")
    request_format = CustomFormat()
    probed_items = ("checkpoint",)

    @classmethod
    def known_items(cls, instance: Instance) -> list[KnownItem]:
        return checkpoint_items(CustomGold.of(instance).checkpoints)

    @classmethod
    def read_source(cls, source: Path, params: Any) -> None:
        load_custom(source)

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        if source is None:
            raise InputError("benchmark 'custom'", f"needs `source:`, a folder of your own data; {LAYOUT_DOC}")
        return CUSTOM_LAYOUT.sample(load_custom(source), sample, seed)

    def stats(self, instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
        docs = list(documents)
        return {"instances_by_group": by_group(instances, docs), "instances_by_type": by_type(instances),
                "histories": histories(docs)}

    def analyze_run(self, inputs: AnalysisInputs) -> dict[str, Any]:
        return {"scores_by_type_and_group": scores_by_type_and_group(inputs.scores, inputs.instances),
                **self.stats(inputs.instances, inputs.documents())}


CELL = ["agent", "backbone", "retriever", "judge", "metric"]


def scores_by_type_and_group(scores: pd.DataFrame, instances: list[Instance]) -> pd.DataFrame:
    """Per cell and metric, per (instance type, group): the mean score over the instances that have one,
    how many instances were scored, and the unscored items (never counted as 0)."""
    kinds = {i.instance_id: TYPE_NAMES[action_type(i)] for i in instances}
    frame = scores.assign(type=scores["instance_id"].map(kinds))
    return (frame.groupby([*CELL, "type", "group"], dropna=False)
            .agg(mean=("value", "mean"), scored=("value", "count"), instances=("instance_id", "nunique"),
                 unscored_items=("n_unscored", "sum"))
            .reset_index())


def _frame(instances: list[Instance]) -> pd.DataFrame:
    return pd.DataFrame([{"group": i.group, "user": i.user_id, "type": TYPE_NAMES[action_type(i)],
                          "items": scored_items(i)} for i in instances], columns=["group", "user", "type", "items"])


def by_group(instances: list[Instance], documents: list[Document]) -> pd.DataFrame:
    """Instances per group and type, with the history turns (and evidence turns) of the group's users."""
    frame = _frame(instances)
    table = frame.groupby("group").agg(instances=("user", "size"), users=("user", "nunique"))
    types = pd.crosstab(frame["group"], frame["type"]).reindex(columns=list(TYPE_NAMES.values()), fill_value=0)
    turns = Counter(d.owner for d in documents)
    evidence = Counter(d.owner for d in documents if d.meta.get("supports"))
    users = frame.groupby("group")["user"].agg(set)
    table["history_turns"] = [sum(turns[u] for u in users[g]) for g in table.index]
    table["evidence_turns"] = [sum(evidence[u] for u in users[g]) for g in table.index]
    return table.join(types)


def by_type(instances: list[Instance]) -> pd.DataFrame:
    """Per instance type: instances, users, and the items each is scored on (checkpoints, slots, candidates)."""
    frame = _frame(instances)
    table = frame.groupby("type").agg(instances=("user", "size"), users=("user", "nunique"),
                                      items_mean=("items", "mean"), items_min=("items", "min"),
                                      items_max=("items", "max"))
    order = [t for t in TYPE_NAMES.values() if t in table.index]
    return table.loc[order].assign(scored_item={TYPE_NAMES[TEXT]: "checkpoint", TYPE_NAMES[API]: "gold slot",
                                                TYPE_NAMES[RANKING]: "candidate"})


def histories(documents: list[Document]) -> pd.DataFrame:
    """One row: users, turns, turns per user, and the turns tagged as preference evidence."""
    turns = pd.Series(Counter(d.owner for d in documents), dtype=float)
    n_evidence = sum(1 for d in documents if d.meta.get("supports"))
    return pd.DataFrame([{"users": len(turns), "turns": int(turns.sum()), "turns_per_user_mean": turns.mean(),
                          "turns_per_user_min": turns.min(), "turns_per_user_max": turns.max(),
                          "evidence_turns": n_evidence}], index=pd.Index(["all"], name="histories"))
