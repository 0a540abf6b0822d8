"""APeB: personalized product search from noisy behaviour histories (rule-scored, Hit@k and MRR).

The official release is not public, so `build` constructs the benchmark from
seeded synthetic behaviour logs with the paper's pipeline: search-to-order
session mining, non-trivial filtering, intent/refined queries, hard or random
candidate sets.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from perseval.benchmarks.apeb.catalog import Catalog
from perseval.benchmarks.apeb.documents import event_documents
from perseval.benchmarks.apeb.logs import generate_logs
from perseval.benchmarks.apeb.sessions import (FILTER_REASONS, MiningConfig, Session, hard_candidates,
                                               mine_sessions, random_candidates)
from perseval.benchmarks.base import Benchmark, BenchmarkData, JudgeBinding
from perseval.errors import ConfigError, InputError
from perseval.metrics.ranking import hit_at_k, rank_of, reciprocal_rank
from perseval.records import AgentOutput, Instance, InstanceScore, Judgment
from perseval.registry import register_benchmark

METRICS = ("hit@1", "hit@5", "mrr")
QUERY_LEVELS = ("intent", "refined")
TOP_K = 5
DEFAULTS: dict[str, Any] = {
    "candidates": "hard", "query_levels": list(QUERY_LEVELS), "delta_minutes": 30, "history_days": 60,
    "min_browsed": 3, "min_history": 10, "min_candidates": 10, "random_size": 10,
}


def _check_params(params: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"apeb: unknown params {unknown}; known: {sorted(DEFAULTS)}")
    merged = {**DEFAULTS, **params}
    if merged["candidates"] not in ("hard", "random"):
        raise ConfigError(f"apeb: params.candidates must be 'hard' or 'random', got {merged['candidates']!r}")
    levels = merged["query_levels"]
    if not levels or any(level not in QUERY_LEVELS for level in levels):
        raise ConfigError(f"apeb: params.query_levels must be a non-empty subset of {list(QUERY_LEVELS)}")
    if int(merged["random_size"]) < TOP_K or int(merged["min_candidates"]) < TOP_K:
        raise ConfigError(f"apeb: candidate sets need at least {TOP_K} products")
    return merged


@register_benchmark("apeb")
class APeB(Benchmark):
    headline_metric = "hit@1"
    group_label = "category"
    uses_llm_judge = False

    def __init__(self, params: dict[str, Any] | None = None):
        super().__init__(params)
        self.settings = _check_params(self.params)

    # -- construction -------------------------------------------------------------------------

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        if source is not None:
            raise InputError(source, "ingesting the official APeB release is not supported yet (its behaviour "
                                     "logs are not public); leave `source` unset to construct APeB from "
                                     "seeded synthetic logs")
        s = self.settings
        logs = generate_logs(sample, seed)
        cfg = MiningConfig(delta_minutes=float(s["delta_minutes"]), history_days=int(s["history_days"]),
                           min_browsed=int(s["min_browsed"]), min_history=int(s["min_history"]))
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
                "instances": len(instances), "documents": len(documents), "candidates": s["candidates"]}
        return BenchmarkData(instances, documents, info)

    def _candidate_ids(self, session: Session, catalog: Catalog, seed: int) -> list[str]:
        s = self.settings
        if s["candidates"] == "random":
            return random_candidates(session, catalog, seed, int(s["random_size"]))
        return hard_candidates(session, catalog, seed, int(s["min_candidates"]))

    def _instances(self, session: Session, catalog: Catalog, seed: int) -> list[Instance]:
        cards = [catalog.by_id[pid].card() for pid in self._candidate_ids(session, catalog, seed)]
        queries = {"intent": session.intent_query, "refined": session.refined_query}
        gold = {"purchased": session.purchased, "session": session.summary()}
        return [
            Instance(f"apeb-{session.user_id}-{level}", self.name, session.user_id, session.category,
                     queries[level], payload={"query_level": level, "candidates": cards},
                     gold=copy.deepcopy(gold))  # an independent copy per instance
            for level in self.settings["query_levels"]
        ]

    # -- scoring ------------------------------------------------------------------------------

    async def judge(self, instance: Instance, output: AgentOutput, judge: JudgeBinding | None) -> list[Judgment]:
        purchased = instance.gold["purchased"]
        ranking, problem = valid_ranking(instance, output)
        if ranking is None:
            # An unusable answer is the agent's fault, so it is a scored miss, not an unscored item.
            scores = {m: 0.0 for m in METRICS}
            feedback, raw = f"invalid output, counted as a miss: {problem}", output.text
        else:
            scores = {"hit@1": hit_at_k(ranking, purchased, 1), "hit@5": hit_at_k(ranking, purchased, TOP_K),
                      "mrr": reciprocal_rank(ranking, purchased)}
            rank = rank_of(ranking, purchased)
            feedback = f"purchase at rank {rank}" if rank else f"purchase not in the top {len(ranking)}"
            raw = json.dumps(ranking)
        return [Judgment(instance.instance_id, output.agent, output.repeat, "rule", 0, m, "rank",
                         100.0 * scores[m], "scored", raw=raw, feedback=feedback) for m in METRICS]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        by_item = {j.item_id: j for j in judgments if j.kind == "rank"}
        out = []
        for m in METRICS:
            j = by_item.get(m)
            scored = j is not None and j.status == "scored"
            out.append(InstanceScore(instance.instance_id, output.agent, output.repeat,
                                     j.judge if j else "rule", j.judge_repeat if j else 0, instance.group, m,
                                     j.score if scored else None, n_items=int(j is not None),
                                     n_unscored=int(j is not None and not scored)))
        return out


def valid_ranking(instance: Instance, output: AgentOutput) -> tuple[list[str] | None, str]:
    """The output's ranking when it is exactly min(5, |candidates|) distinct candidate ids, else (None, why)."""
    if output.status != "ok":
        return None, f"status {output.status}" + (f" ({output.error})" if output.error else "")
    ranking = (output.parsed or {}).get("ranking")
    if not isinstance(ranking, list):
        return None, "no ranking list in the parsed output"
    ids = {c["id"] for c in instance.payload["candidates"]}
    k = min(TOP_K, len(ids))
    # Checked here too, so an agent cannot list every candidate to inflate Hit@5.
    if len(ranking) != k or len(set(ranking)) != k or not set(ranking) <= ids:
        return None, f"ranking must be {k} distinct candidate ids, got {ranking!r}"
    return list(ranking), ""
