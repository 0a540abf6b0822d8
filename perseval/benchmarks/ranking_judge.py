"""The rule judge of a ranking (perseval.benchmarks.rankings), which APeB and a user's own data both register
under their own names (apeb.ranking, custom.ranking): Hit@1 (headline), Hit@5 and reciprocal rank of the
chosen candidate, on 0..100, and `valid` (100 when the output is a usable ranking of exactly
min(5, |candidates|) candidate ids).

An unusable ranking is the agent's fault, so it is a scored miss, not an unscored item; `valid` counts
such outputs per system (100 - valid = the share of invalid or failed outputs).
"""
from __future__ import annotations

import json

from perseval.benchmarks.rankings import TOP_K, check_ranking
from perseval.benchmarks.views import RankingGold
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.judges.base import Judge, JudgeBinding
from perseval.metrics.ranking import hit_at_k, rank_of, reciprocal_rank

METRICS = ("hit@1", "hit@5", "mrr", "valid")


class RankingJudge(Judge):
    """Hit@1, Hit@5, MRR and `valid` of one ranking, by rule; registered by each benchmark."""

    item = "rank"
    metrics = METRICS
    uses_llm = False

    suffix = ""  # of each metric's name

    def ranking(self, instance: Instance, output: AgentOutput) -> tuple[list[str] | None, str]:
        return check_ranking(instance, output)

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        purchased = RankingGold.of(instance).purchased
        ranking, problem = self.ranking(instance, output)
        if ranking is None:
            scores = {m: 0.0 for m in METRICS}  # valid = 0 too
            feedback, raw = f"invalid output, counted as a miss: {problem}", output.text
        else:
            scores = {"hit@1": hit_at_k(ranking, purchased, 1), "hit@5": hit_at_k(ranking, purchased, TOP_K),
                      "mrr": reciprocal_rank(ranking, purchased), "valid": 1.0}
            rank = rank_of(ranking, purchased)
            feedback = f"purchase at rank {rank}" if rank else f"purchase not in the top {len(ranking)}"
            raw = json.dumps(ranking)
        return [self.judgment(instance, output, binding, m + self.suffix, 100.0 * scores[m], "scored", raw, feedback)
                for m in METRICS]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        by_item = {j.item_id: j for j in judgments}
        out = []
        for m in self.metrics:
            j = by_item.get(m)
            scored = j is not None and j.status == "scored"
            out.append(self.instance_score(instance, output, judgments, m, j.score if scored else None,
                                           int(j is not None), int(j is not None and not scored)))
        return out
