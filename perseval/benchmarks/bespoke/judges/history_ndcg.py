"""Rule judge of bespoke-history: nDCG@10 and nDCG@20 (x100) of a session ranking against the oracle set.

A query whose oracle kept no session has no defined nDCG: it is unscored and counted, not 0.
"""
from __future__ import annotations

from perseval.benchmarks.bespoke.history_retrieval import ndcg_at
from perseval.judges.base import Judge, JudgeBinding
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_judge
from perseval.benchmarks.bespoke.views import HistoryGold

CUTOFFS = (10, 20)


@register_judge("bespoke.history_ndcg")
class HistoryNdcg(Judge):
    benchmark = "bespoke-history"
    item = "ranking"
    metrics = tuple(f"ndcg@{k}" for k in CUTOFFS)
    uses_llm = False

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        relevant = set(HistoryGold.of(instance).oracle)
        ranking = (output.parsed or {}).get("ranking", []) if output.status == "ok" else []
        out = []
        for k in CUTOFFS:
            value = ndcg_at(ranking, relevant, k)
            if output.status != "ok":
                out.append(self.judgment(instance, output, binding, f"ndcg@{k}", None, "failed", output.text,
                                         output.error))
            elif value is None:
                out.append(self.judgment(instance, output, binding, f"ndcg@{k}", None, "unscored",
                                         feedback="the oracle kept no session for this query"))
            else:
                out.append(self.judgment(instance, output, binding, f"ndcg@{k}", value))
        return out

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        out = []
        for k in CUTOFFS:
            items = [j for j in judgments if j.item_id == f"ndcg@{k}"]
            value = items[0].score if items and items[0].status == "scored" else None
            out.append(self.instance_score(instance, output, items, f"ndcg@{k}",
                                           None if value is None else 100 * value, len(items),
                                           int(value is None)))
        return out
