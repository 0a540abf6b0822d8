"""IBA-Bench: constructed histories; Generate(text) checkpoints judged by an LLM, CallAPI slots by rule.

params (the `params:` of the benchmark entry; IbaParams):
  noise_per_evidence  noise turns per evidence turn (default 100, as in the paper)
  dynamic_rate        chance that a dimension with shifts is dynamic (default 0.3)
  extra_evidence_rate chance of a second evidence turn per value (default 0.3)
  scenarios           optional list of scenario names (default: all)
  distribution        "simple" (default) or "table2": match Table 2's evidence/constraint counts per domain
  full_size           true: the paper's 6,962 instances with Table 2/13 counts (implies table2)
  qa_probes           also build a QA twin of every task instance (the knowledge-to-action gap, 5.3)
  construction        {mode: template | llm, user_model, assistant_model, task_model, ...}: who writes the text
  part_size           instances per written part of a streamed build (memory, not content)
  analysis            settings of the cross-cell analyses (see analysis.AnalysisParams)

The build streams part by part (a full-size build has about 1.4 million turns), so
the construct stage's one writer never holds it whole; in LLM mode the role
models rewrite each part's surface text as it goes.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Iterator, Mapping, Sequence

import pandas as pd
from pydantic import Field

from perseval.benchmarks.actions import ActionFormat
from perseval.benchmarks.base import AnalysisInputs, Benchmark, BenchmarkData, build_all
from perseval.benchmarks.iba.analysis import AnalysisParams, analyze
from perseval.benchmarks.iba.analysis_evidence import evidence_by_step
from perseval.benchmarks.iba.construct import ConstructParams, build_stats, iter_build, plan_build
from perseval.benchmarks.iba.llm_construct import ROLES, Construction, Pair, SurfaceWriter, Writers
from perseval.benchmarks.iba.qa import QA_METRIC, make_qa_probes
from perseval.benchmarks.iba.release import IBA_LAYOUT
from perseval.benchmarks.iba.slot_agreement import slot_agreement_tables
from perseval.benchmarks.iba.tables import domain_table, scenario_table
from perseval.benchmarks.iba.taxonomy import load_taxonomy
from perseval.llm.base import ChatModel
from perseval.core.instances import Document, Instance
from perseval.kernel.registry import register_benchmark
from perseval.benchmarks.iba.views import IbaGold, IbaPayload
from perseval.benchmarks.probes import KnownItem, checkpoint_items


class IbaParams(ConstructParams):
    qa_probes: bool = False
    construction: Construction = Construction()
    part_size: int = Field(256, ge=1)
    analysis: AnalysisParams = AnalysisParams()


def chunks(pairs: Iterable[Pair], size: int) -> Iterator[list[Pair]]:
    it = iter(pairs)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


@register_benchmark("iba")
class IbaBenchmark(Benchmark[IbaParams]):
    Payload, Gold = IbaPayload, IbaGold
    headline_metric = "score"
    group_label = "domain"
    llm_judges = ("iba.checkpoint",)
    rule_judges = ("iba.slots",)
    optional_llm_judges = ("iba.slot_llm",)  # the paper's LLM-judged CallAPI slots, beside the rule scorer
    request_format = ActionFormat()
    probed_items = ("checkpoint",)

    @classmethod
    def known_items(cls, instance: Instance) -> list[KnownItem]:
        return checkpoint_items(IbaGold.of(instance).checkpoints)

    @classmethod
    def construction_models(cls, params: IbaParams, backbones: Sequence[str]) -> dict[str, str]:
        c = params.construction
        if c.mode != "llm":
            return {}
        chosen = {"user": c.user_model, "assistant": c.assistant_model, "task": c.task_model}
        return {role: chosen[role] or backbones[0] for role in ROLES}

    @classmethod
    def read_source(cls, source: Path, params: IbaParams) -> None:
        IBA_LAYOUT.load(source)  # every row of both tables is checked as the build would read it

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        return build_all(self, sample=sample, seed=seed, source=source)

    def stats(self, instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
        """Tables 2 (per domain) and 13 (per scenario) counted from the data, beside the generic counts."""
        return {"table2_domains": domain_table(instances), "table13_scenarios": scenario_table(instances),
                **super().stats(instances, documents)}

    async def batches(self, *, sample: int, seed: int, source: Path | None,
                      models: Mapping[str, ChatModel] | None = None) -> AsyncIterator[BenchmarkData]:
        if source is not None:  # `sample` applies to a release as to a construction: it is in the data key
            data = IBA_LAYOUT.sample(IBA_LAYOUT.load(source), sample, seed)
            probes = self._probes(data.instances)
            yield BenchmarkData(data.instances + probes, data.documents,
                                {**data.info, **({"qa_probes": len(probes)} if self.params.qa_probes else {})})
            return
        taxonomy = load_taxonomy()
        plan = plan_build(taxonomy, sample=sample, seed=seed, params=self.params)
        stats = build_stats(self.params, plan, sample)
        writer = self._writer(taxonomy, models)
        n_probes = 0
        for chunk in chunks(iter_build(plan, seed, self.params), self.params.part_size):
            if writer is not None:
                chunk = await writer.rewrite_chunk(chunk)
            for inst, turns in chunk:
                stats.add(inst, turns)
            probes = self._probes([i for i, _ in chunk])
            n_probes += len(probes)
            # ids grow with the plan index and a twin's id follows its base: parts concatenate in id order
            instances = sorted([i for i, _ in chunk] + probes, key=lambda i: i.instance_id)
            yield BenchmarkData(instances, [d for _, turns in chunk for d in turns])
        info: dict[str, Any] = stats.info()
        if self.params.qa_probes:
            info["qa_probes"] = n_probes
        if writer is not None:
            info.update(mode="llm", llm=dict(writer.stats))
        yield BenchmarkData([], [], info)

    def _probes(self, instances: list[Instance]) -> list[Instance]:
        if not self.params.qa_probes:
            return []
        return make_qa_probes(instances)  # task instances only: a twin is not probed again

    def _writer(self, taxonomy: Any, models: Mapping[str, ChatModel] | None) -> SurfaceWriter | None:
        if self.params.construction.mode != "llm":
            return None
        missing = [r for r in ROLES if not models or r not in models]
        if missing:
            raise ValueError(f"iba LLM-mode construction needs models for roles {missing}")
        assert models is not None
        return SurfaceWriter(taxonomy, Writers(models["user"], models["assistant"], models["task"]),
                             self.params.construction)

    def analyze_run(self, inputs: AnalysisInputs) -> dict[str, Any]:
        api_ids = {i.instance_id for i in inputs.instances if IbaPayload.of(i).is_api_call}
        steps = evidence_by_step(inputs.outputs(), inputs.evidence(), inputs.instances)  # traces, not scores
        return {**super().analyze_run(inputs), **slot_agreement_tables(inputs.scores, api_ids, inputs.judgments),
                **({"evidence_by_step": steps} if steps is not None else {})}

    def analyze(self, scores: pd.DataFrame, instances: list[Instance]) -> dict[str, Any]:
        # the analyses tell QA probes from tasks by the instance's action type, on one metric
        scores = scores.assign(metric=scores["metric"].replace({QA_METRIC: "score"}))
        return analyze(scores, instances, self.params.analysis.model_dump(exclude_none=True))
