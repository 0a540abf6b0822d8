"""APeB: personalized product search from noisy behaviour histories (rule-scored Hit@k and MRR).

`build` mines the benchmark from behaviour logs with the paper's pipeline (section 2): search-to-order
sessions, the non-trivial filter, intent and refined queries, hard and random candidate sets. The logs
are read from the entry's `source:` folder (docs/apeb-log-schema.md) or generated with a seed.

One entry builds every (query level x candidate set) cell of the paper's table: an instance per kept
session, query level and candidate set, so one experiment entry gives the whole table and its
analysis compares cells over the same sessions.

params (all optional):
  query_levels     [intent, refined]             which queries become instances
  candidate_sets   [hard, random]                which candidate sets become instances
  mining           delta_minutes 30, history_days 60, session_days 30, min_browsed 5, min_history 10,
                   keep latest                   (sessions.MiningConfig)
  candidates       pad_to null, max_size null, random_size match   (candidates.CandidateConfig)
  logs             the generator's shape when there is no source  (synth_logs.LogConfig)
  evidence_items   8: history lines in the purchase's category kept in gold for the rubric judge
`sample` is the number of generated users (each has one non-trivial session); with a source it is the
number of mined sessions kept (a seeded subset; all of them when fewer are found).
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Iterable, Literal

import pandas as pd
from pydantic import Field, field_validator

from perseval.benchmarks.apeb.analysis import analyze
from perseval.benchmarks.rankings import RankingFormat
from perseval.benchmarks.apeb.candidates import CandidateConfig, CandidateSet, candidate_set
from perseval.benchmarks.apeb.catalog import Catalog
from perseval.benchmarks.apeb.documents import event_documents, event_text
from perseval.benchmarks.apeb.logfiles import load_logs
from perseval.benchmarks.apeb.logs import BehaviourLogs
from perseval.benchmarks.apeb.sessions import FILTER_REASONS, MiningConfig, Session, mine_sessions
from perseval.benchmarks.apeb.stats import dataset_tables
from perseval.benchmarks.apeb.synth_logs import LogConfig, generate_logs
from perseval.benchmarks.base import Benchmark, BenchmarkData, gather
from perseval.kernel.params import Params
from perseval.core.instances import Document, Instance
from perseval.kernel.registry import register_benchmark
from perseval.benchmarks.apeb.views import ApebGold, ApebPayload

QueryLevel = Literal["intent", "refined"]
QUERY_LEVELS: tuple[QueryLevel, ...] = ("intent", "refined")
CANDIDATE_SETS: tuple[CandidateSet, ...] = ("random", "hard")  # the paper's column order


def _distinct(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("lists a value twice")
    return values


class ApebParams(Params):
    query_levels: list[QueryLevel] = Field(default_factory=lambda: list(QUERY_LEVELS), min_length=1)
    candidate_sets: list[CandidateSet] = Field(default_factory=lambda: list(CANDIDATE_SETS), min_length=1)
    mining: MiningConfig = MiningConfig()
    candidates: CandidateConfig = CandidateConfig()
    logs: LogConfig = LogConfig()
    evidence_items: int = Field(8, ge=0)

    _levels = field_validator("query_levels", "candidate_sets")(_distinct)


@register_benchmark("apeb")
class APeB(Benchmark[ApebParams]):
    Payload, Gold = ApebPayload, ApebGold
    headline_metric = "hit@1"
    group_label = "category"
    rule_judges = ("apeb.ranking",)
    request_format = RankingFormat()

    @classmethod
    def read_source(cls, source: Path, params: ApebParams) -> None:
        load_logs(source)  # mining is left to the build: a source without sessions is a result, not an error

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        s = self.params
        logs: BehaviourLogs = load_logs(source) if source is not None else generate_logs(sample, seed, s.logs)
        mined = mine_sessions(logs.events, s.mining)
        sessions = mined.sessions if source is None else select_sessions(mined.sessions, sample, seed)
        instances, documents = gather((self.instances(session, logs.catalog, seed),
                                       event_documents(session.user_id, session.history, logs.catalog))
                                      for session in sessions)
        info: dict[str, Any] = {
            "origin": "source" if source is not None else "generated", "users_in_logs": len(logs.events),
            "events_in_logs": logs.n_events, "products": len(logs.catalog.products),
            **{k: mined.counts[k] for k in ("sessions_found", "sessions_kept", "order_outside_delta",
                                            "order_without_search", "extra_sessions_dropped")},
            **{f"filtered_{r}": mined.counts[f"filtered_{r}"] for r in FILTER_REASONS},
            "sessions_used": len(sessions), "instances": len(instances), "documents": len(documents),
            "candidate_sets": [s.candidates.label(c) for c in s.candidate_sets],
        }
        return BenchmarkData(instances, documents, info)

    def instances(self, session: Session, catalog: Catalog, seed: int) -> list[Instance]:
        """One instance per query level and candidate set of a kept session."""
        s = self.params
        queries = {"intent": session.intent_query, "refined": session.refined_query}
        gold = {"purchased": session.purchased, "session": session.summary(),
                "history_evidence": history_evidence(session, catalog, s.evidence_items)}
        out = []
        for kind in s.candidate_sets:
            cards = [catalog.by_id[pid].card() for pid in candidate_set(kind, session, catalog, seed, s.candidates)]
            label = s.candidates.label(kind)
            for level in s.query_levels:
                out.append(Instance(
                    f"apeb-{session.user_id}-{level}-{label}", self.name, session.user_id, session.category,
                    queries[level], payload={"query_level": level, "candidate_set": label, "candidates": cards},
                    gold={**gold, "session": dict(gold["session"])}))  # independent copies per instance
        return out

    def stats(self, instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
        return dataset_tables(instances)

    def analyze(self, scores: pd.DataFrame, instances: list[Instance]) -> dict[str, Any]:
        return analyze(scores, instances)


def select_sessions(sessions: list[Session], sample: int, seed: int) -> list[Session]:
    """A seeded subset of `sample` sessions in user order (all of them when there are fewer)."""
    if len(sessions) <= sample:
        return sessions
    keep = set(random.Random(f"{seed}:sample").sample(range(len(sessions)), sample))
    return [s for i, s in enumerate(sessions) if i in keep]


def history_evidence(session: Session, catalog: Catalog, n: int) -> list[str]:
    """The last `n` history events about the purchase's category: what a good trajectory should draw on
    (kept in gold for the rubric judge; agents never see gold)."""
    related = [e for e in session.history if e.category == session.category]
    return [f"{e.ts.date().isoformat()} {event_text(e, catalog)}" for e in related[-n:]] if n else []
