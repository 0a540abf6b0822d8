"""APeB's rule judges: the shared ranking judge (perseval.benchmarks.ranking_judge) registered as `apeb.ranking`
(Hit@1 (headline), Hit@5 and reciprocal rank of the purchased product, on 0..100, and `valid`), and
`apeb.ranking_strict`: the same metrics, suffixed `_strict`, under the strict reading of exactly-5
(perseval.benchmarks.apeb.answers.strict_problem): an answer that needed any repair scores 0.
"""
from __future__ import annotations

from perseval.benchmarks.apeb.answers import strict_problem
from perseval.benchmarks.ranking_judge import METRICS, RankingJudge
from perseval.benchmarks.rankings import check_ranking
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_judge


@register_judge("apeb.ranking")
class ApebRankingJudge(RankingJudge):
    benchmark = "apeb"


@register_judge("apeb.ranking_strict")
class StrictRankingJudge(ApebRankingJudge):
    """The strict reading, beside the repaired one: bound by a judge YAML (perseval/benchmarks/apeb/configs/judges/apeb-strict.yaml)."""

    metrics = tuple(f"{m}_strict" for m in METRICS)
    suffix = "_strict"

    def ranking(self, instance: Instance, output: AgentOutput) -> tuple[list[str] | None, str]:
        problem = strict_problem(instance, output)
        return (None, problem) if problem else check_ranking(instance, output)
