"""bespoke-meta: the meta-evaluation of section 4.1 (Table 3) on the release's held-out meta-test pairs.

One instance per meta-test R-J pair (the paper samples two per query). The system under test is the
evaluator: agent `bespoke.evaluator` (one YAML per variant: w/o personalization, w/o feedback, with
feedback) rates the pair's response; rule judge `bespoke.evaluator_scores` records its scores next to the
human's, and LLM judge `bespoke.feedback_match` (the meta-judge) says whether its feedback and the human's
agree. Table 3 (Pearson and Spearman per criterion, feedback accuracy) is this benchmark's analysis.
"""
from __future__ import annotations

from typing import Any

from perseval.benchmarks.base import AnalysisInputs
from perseval.benchmarks.bespoke.benchmark import BespokeBenchmark, to_instance
from perseval.benchmarks.bespoke.records import BespokeQuery
from perseval.core.instances import Instance
from perseval.kernel.registry import register_benchmark
from perseval.benchmarks.bespoke.views import MetaGold


@register_benchmark("bespoke-meta")
class BespokeMetaBenchmark(BespokeBenchmark):
    Gold = MetaGold
    headline_metric = "feedback_accuracy"
    llm_judges = ("bespoke.feedback_match",)
    rule_judges = ("bespoke.evaluator_scores",)
    request_format = None
    combined_metrics = ()
    carries_human_labels = True
    human_scale = 20.0  # the evaluator's criterion scores are reported x20 (0..100); humans rate 1..5

    @classmethod
    def human_scores(cls, instance: Instance) -> dict[str, float]:
        return {criterion: rating.score for criterion, rating in MetaGold.of(instance).human.items()}

    def instances(self, q: BespokeQuery) -> list[Instance]:
        base = to_instance(q)
        out = []
        for k, pair in enumerate(q.meta_test):
            gold = {**base.gold, "response": pair.contents,
                    "human": {name: {"score": r.score, "feedback": r.feedback} for name, r in pair.ratings.items()}}
            out.append(Instance(f"bespoke-meta-{q.user}-{q.query_id}-{k}", self.name, q.user, q.user, q.query, {}, gold))
        return out

    def analyze_run(self, inputs: AnalysisInputs) -> dict[str, Any]:
        from perseval.benchmarks.bespoke.meta_analysis import table3

        return {"table3": table3(inputs.scores, inputs.instances, inputs.agents)}
