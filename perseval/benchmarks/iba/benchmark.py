"""IBA-Bench: constructed histories, Generate(text) checkpoints judged by an LLM, CallAPI slots by rule.

params (the `params:` of the benchmark entry):
  noise_per_evidence  noise turns per evidence turn (default 100, as in the paper)
  dynamic_rate        chance that a dimension with shifts is dynamic (default 0.3)
  extra_evidence_rate chance of a second evidence turn per value (default 0.3)
  scenarios           optional list of scenario names (default: all)
  distribution        "simple" (default) or "table2": match Table 2's evidence/constraint counts per domain
  full_size           true: the paper's 6,962 instances with Table 2/13 counts (implies table2)
  qa_probes           also build a QA twin of every task instance (the knowledge-to-action gap, 5.3)
  analysis            settings of the cross-cell analyses (see analysis.ANALYSIS_PARAMS)
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pandas as pd

from perseval.benchmarks.base import Benchmark, BenchmarkData, JudgeBinding
from perseval.benchmarks.iba.construct import ConstructParams, construct
from perseval.benchmarks.iba.prompts import judge_messages
from perseval.benchmarks.iba.scoring import instance_score, slot_judgments
from perseval.benchmarks.iba.taxonomy import load_taxonomy
from perseval.benchmarks.iba.analysis import ANALYSIS_PARAMS, analyze
from perseval.benchmarks.iba.qa import make_qa_probes
from perseval.benchmarks.iba.release import load_release
from perseval.errors import ConfigError
from perseval.judges.binary import binary_verdict
from perseval.records import AgentOutput, Instance, InstanceScore, Judgment
from perseval.registry import register_benchmark


QA_METRIC = "qa_score"


@register_benchmark("iba")
class IbaBenchmark(Benchmark):
    headline_metric = "score"
    group_label = "domain"
    uses_llm_judge = True

    def __init__(self, params: dict[str, Any] | None = None):
        super().__init__(params)
        own = {"qa_probes", "analysis"}
        self.qa_probes = bool(self.params.get("qa_probes", False))
        self.analysis_params = dict(self.params.get("analysis") or {})
        unknown = set(self.analysis_params) - set(ANALYSIS_PARAMS)
        if unknown:
            raise ConfigError(f"iba params: unknown keys under 'analysis': {sorted(unknown)}; "
                              f"known: {sorted(ANALYSIS_PARAMS)}")
        # fail early on a bad config
        self.construct_params = ConstructParams.from_mapping({k: v for k, v in self.params.items() if k not in own})

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        if source is not None:
            data = load_release(source)
        else:
            data = construct(load_taxonomy(), sample=sample, seed=seed, params=self.construct_params)
        if self.qa_probes:
            probes = make_qa_probes([i for i in data.instances if i.payload.get("action_type") != "qa"])
            data.instances.extend(probes)
            data.info["qa_probes"] = len(probes)
        return data

    def analyze(self, scores: pd.DataFrame, instances: list[Instance]) -> dict[str, Any]:
        # the analyses tell QA probes from tasks by the instance's action type, on one metric
        scores = scores.assign(metric=scores["metric"].replace({QA_METRIC: "score"}))
        return analyze(scores, instances, self.analysis_params)

    async def judge(self, instance: Instance, output: AgentOutput, judge: JudgeBinding | None) -> list[Judgment]:
        if instance.payload.get("action_type") == "call_api":
            return slot_judgments(instance, output, judge.name if judge else "rule", judge.repeat if judge else 0)
        checkpoints = instance.gold.get("checkpoints", [])
        return list(await asyncio.gather(*(self._checkpoint(instance, output, cp, judge) for cp in checkpoints)))

    async def _checkpoint(self, instance: Instance, output: AgentOutput, checkpoint: dict[str, Any],
                          judge: JudgeBinding | None) -> Judgment:
        def judgment(score: float | None, status: str, raw: str = "", feedback: str = "") -> Judgment:
            return Judgment(instance.instance_id, output.agent, output.repeat, judge.name if judge else "none",
                            judge.repeat if judge else 0, checkpoint["id"], "checkpoint", score, status, raw, feedback)

        if output.status != "ok":
            # the agent's fault, not the judge's: score 0 without spending a judge call
            return judgment(0.0, "scored", feedback=f"agent output {output.status}; not sent to the judge")
        if judge is None:
            return judgment(None, "unscored", feedback="no judge configured for a Generate(text) instance")
        v = await binary_verdict(judge, judge_messages(instance.query, output.text, checkpoint["statement"]))
        return judgment(v.score, v.status, raw=v.raw, feedback=v.feedback)

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        # QA probes get their own metric so a cell's headline `score` is task execution only
        metric = QA_METRIC if instance.payload.get("action_type") == "qa" else "score"
        return instance_score(instance, output, judgments, metric=metric)
