"""bespoke-history: history retrieval (section 4.4, C.4, Table 5).

Ground truth: for each query an LLM (the `oracle` construction model; GPT-5 in the paper) judges every
session of the user, one (query, session) pair per call, given the query's gold rubric (Table 22), and the
sessions it keeps are the query's oracle histories (`gold["oracle"]`, with every decision in
`gold["oracle_decisions"]`). This happens when the data is built, so the labels are part of the data key
(they change with the oracle model's identity) and are shared by every retrieval system.

Systems: `bespoke.history_retriever` ranks the user's sessions with a bi-encoder (the experiment's
retriever) using the raw query, a CoT expansion or a pseudo-history expansion; rule judge
`bespoke.history_ndcg` scores nDCG@10 and @20 against the oracle set.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator, Mapping, Sequence

from pydantic import Field

from perseval.benchmarks.base import AnalysisInputs, BenchmarkData
from perseval.benchmarks.bespoke.benchmark import BespokeBenchmark, BespokeParams
from perseval.benchmarks.bespoke.context import Memo, select_sessions
from perseval.benchmarks.bespoke.views import BespokeGold, HistoryGold
from perseval.core.errors import ConfigError
from perseval.llm.base import ChatModel
from perseval.core.instances import CORPUS_OWNER, Document, Instance
from perseval.kernel.registry import register_benchmark


class HistoryParams(BespokeParams):
    corpus: bool = False  # retrieval runs over each user's sessions only
    oracle_model: str | None = None  # None: the experiment's first backbone
    oracle_max_tokens: int = Field(48, ge=1)


@register_benchmark("bespoke-history")
class BespokeHistoryBenchmark(BespokeBenchmark):
    Params = HistoryParams
    params: HistoryParams
    Gold = HistoryGold
    headline_metric = "ndcg@10"
    llm_judges = ()
    rule_judges = ("bespoke.history_ndcg",)
    request_format = None
    combined_metrics = ()

    @classmethod
    def construction_models(cls, params: Any, backbones: Sequence[str]) -> dict[str, str]:
        name = params.oracle_model or (backbones[0] if backbones else None)
        if name is None:
            raise ConfigError("bespoke-history: the oracle needs a model: set params.oracle_model or a backbone")
        return {"oracle": name}

    async def batches(self, *, sample: int, seed: int, source: Path | None,
                      models: Mapping[str, ChatModel] | None = None) -> AsyncIterator[BenchmarkData]:
        data = self.build(sample=sample, seed=seed, source=source)
        if not models or "oracle" not in models:
            raise ConfigError("bespoke-history: the oracle model was not served for the build")
        by_user: dict[str, list[Document]] = {}
        for d in data.documents:
            if d.owner != CORPUS_OWNER:
                by_user.setdefault(d.owner, []).append(d)
        memo = Memo()
        labelled = [await self._label(models["oracle"], memo, inst, by_user.get(inst.user_id, []))
                    for inst in data.instances]
        info = {**data.info, "oracle_sessions_per_query": (sum(len(HistoryGold.of(i).oracle) for i in labelled)
                                                           / max(len(labelled), 1))}
        yield BenchmarkData(labelled, data.documents, info)

    async def _label(self, model: ChatModel, memo: Memo, inst: Instance, sessions: list[Document]) -> Instance:
        """The instance with its oracle labels added to the gold (a new instance: a built one is not changed)."""
        decisions = await select_sessions(model, memo, inst.query, sessions, repeat=0,
                                          max_tokens=self.params.oracle_max_tokens,
                                          rubric=BespokeGold.of(inst).rubric)
        labels = {"oracle": [s.doc.doc_id for s in decisions if s.keep],
                  "oracle_decisions": [{"doc_id": s.doc.doc_id, "keep": s.keep, "status": s.status,
                                        "reason": s.reason} for s in decisions],
                  "sessions": len(sessions)}
        return inst.with_gold(**labels)

    def instances(self, q: Any) -> list[Instance]:
        inst = super().instances(q)[0]
        return [Instance(inst.instance_id.replace("bespoke-", "bespoke-history-", 1), self.name, inst.user_id,
                         inst.group, inst.query, {}, inst.gold)]

    def analyze_run(self, inputs: AnalysisInputs) -> dict[str, Any]:
        from perseval.benchmarks.bespoke.history_retrieval import table5

        return {"table5": table5(inputs.scores, inputs.instances, inputs.agents)}
