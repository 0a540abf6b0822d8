"""APeB: personalized product search from noisy behaviour histories (rule-scored, Hit@k and MRR).

The official release is not public, so `build` constructs the benchmark from
seeded synthetic behaviour logs with the paper's pipeline: search-to-order
session mining, non-trivial filtering, intent/refined queries, hard or random
candidate sets.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from perseval.benchmarks.apeb.answers import TOP_K, ApebTask
from perseval.benchmarks.apeb.catalog import Catalog
from perseval.benchmarks.apeb.documents import event_documents
from perseval.benchmarks.apeb.logs import generate_logs
from perseval.benchmarks.apeb.sessions import (FILTER_REASONS, MiningConfig, Session, hard_candidates,
                                               mine_sessions, random_candidates)
from perseval.benchmarks.base import Benchmark, BenchmarkData
from perseval.errors import InputError
from perseval.params import Params
from perseval.records import Instance
from perseval.registry import register_benchmark

QUERY_LEVELS = ("intent", "refined")


class ApebParams(Params):
    candidates: Literal["hard", "random"] = "hard"
    query_levels: list[Literal["intent", "refined"]] = Field(default_factory=lambda: list(QUERY_LEVELS), min_length=1)
    delta_minutes: float = Field(30, gt=0)  # search-to-order window
    history_days: int = Field(60, ge=1)
    min_browsed: int = Field(3, ge=0)
    min_history: int = Field(10, ge=0)
    min_candidates: int = Field(10, ge=TOP_K)
    random_size: int = Field(10, ge=TOP_K)

    @model_validator(mode="after")
    def _distinct_levels(self) -> "ApebParams":
        if len(set(self.query_levels)) != len(self.query_levels):
            raise ValueError("query_levels lists a level twice")
        return self


@register_benchmark("apeb")
class APeB(Benchmark):
    Params = ApebParams
    params: ApebParams
    headline_metric = "hit@1"
    group_label = "category"
    rule_judges = ("apeb.ranking",)
    task_format = ApebTask()

    # -- construction -------------------------------------------------------------------------

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        if source is not None:
            raise InputError(source, "ingesting the official APeB release is not supported yet (its behaviour "
                                     "logs are not public); leave `source` unset to construct APeB from "
                                     "seeded synthetic logs")
        s = self.params
        logs = generate_logs(sample, seed)
        cfg = MiningConfig(delta_minutes=float(s.delta_minutes), history_days=s.history_days,
                           min_browsed=s.min_browsed, min_history=s.min_history)
        mined = mine_sessions(logs.events, cfg)
        instances, documents = [], []
        for session in mined.sessions:
            instances += self._instances(session, logs.catalog, seed)
            documents += event_documents(session.user_id, session.history, logs.catalog)
        info = {"users_generated": sample, "products": len(logs.catalog.products),
                "sessions_found": mined.counts["sessions_found"], "sessions_kept": len(mined.sessions),
                "orders_outside_delta": mined.counts["order_outside_delta"],
                "orders_without_search": mined.counts["order_without_search"],
                "extra_sessions_dropped": mined.counts["extra_sessions_dropped"],
                **{f"filtered_{r}": mined.counts[f"filtered_{r}"] for r in FILTER_REASONS},
                "instances": len(instances), "documents": len(documents), "candidates": s.candidates}
        return BenchmarkData(instances, documents, info)

    def _candidate_ids(self, session: Session, catalog: Catalog, seed: int) -> list[str]:
        s = self.params
        if s.candidates == "random":
            return random_candidates(session, catalog, seed, s.random_size)
        return hard_candidates(session, catalog, seed, s.min_candidates)

    def _instances(self, session: Session, catalog: Catalog, seed: int) -> list[Instance]:
        cards = [catalog.by_id[pid].card() for pid in self._candidate_ids(session, catalog, seed)]
        queries = {"intent": session.intent_query, "refined": session.refined_query}
        gold = {"purchased": session.purchased, "session": session.summary()}
        return [
            Instance(f"apeb-{session.user_id}-{level}", self.name, session.user_id, session.category,
                     queries[level], payload={"query_level": level, "candidates": cards},
                     gold=copy.deepcopy(gold))  # an independent copy per instance
            for level in self.params.query_levels
        ]
