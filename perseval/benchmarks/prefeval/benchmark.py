"""`prefeval`: PrefEval from the official `benchmark_dataset/` folder (`source:`; docs/benchmarks/prefeval.md).

params:
  forms        [explicit, implicit-choice, implicit-persona]   the preference forms that become instances
  tasks        [generation, classification]                    the generation task (LLM judge) and the
                                                               classification task (rule judge)
  inter_turns  [10]     the inter-turn settings: unrelated turns inserted between the preference and the
                        question (the paper's context length)
  topics       null (every topic of the first form's folder) or a list of topic file stems
`sample` is the number of preferences (users) kept, seeded; each keeps all its forms, settings and tasks.
A judge YAML without `kind` binds its model to prefeval.generation; prefeval.classification always runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Literal

import pandas as pd
from pydantic import Field, field_validator

from perseval.benchmarks.base import Benchmark, BenchmarkData
from perseval.benchmarks.prefeval.analysis import analyze
from perseval.benchmarks.prefeval.answers import PrefEvalFormat
from perseval.benchmarks.prefeval.layout import FORMS, TASKS
from perseval.benchmarks.prefeval.release import Selection, build_release, counts, read_all, sample_by_user
from perseval.benchmarks.prefeval.loader import read_inter_turns
from perseval.benchmarks.prefeval.stats import dataset_tables
from perseval.core.errors import InputError
from perseval.core.instances import CORPUS_OWNER, AgentOutput, Document, Instance
from perseval.kernel.params import Params
from perseval.kernel.registry import register_benchmark
from perseval.benchmarks.prefeval.views import PrefEvalGold, PrefEvalPayload
from perseval.benchmarks.prefeval import probes as prefeval_probes
from perseval.benchmarks.probes import Labels

GUIDE = "see docs/benchmarks/prefeval.md for where to get the release and its layout"
Form = Literal["explicit", "implicit-choice", "implicit-persona"]
Task = Literal["generation", "classification"]


def _distinct(values: list[Any]) -> list[Any]:
    if len(set(values)) != len(values):
        raise ValueError("lists a value twice")
    return values


class PrefEvalParams(Params):
    forms: list[Form] = Field(default_factory=lambda: list(FORMS), min_length=1)
    tasks: list[Task] = Field(default_factory=lambda: list(TASKS), min_length=1)
    inter_turns: list[int] = Field(default_factory=lambda: [10], min_length=1)
    topics: list[str] | None = None

    _unique = field_validator("forms", "tasks", "inter_turns")(_distinct)

    @field_validator("inter_turns")
    @classmethod
    def _non_negative(cls, value: list[int]) -> list[int]:
        if any(n < 0 for n in value):
            raise ValueError("an inter-turn setting is 0 or more turns")
        return value

    def selection(self) -> Selection:
        return Selection(list(self.forms), list(self.tasks), list(self.inter_turns), self.topics)


@register_benchmark("prefeval")
class PrefEval(Benchmark[PrefEvalParams]):
    Payload, Gold = PrefEvalPayload, PrefEvalGold
    headline_metric = "accuracy"  # preference following (generation); a classification cell's is mcq_accuracy
    group_label = "topic"
    llm_judges = ("prefeval.generation",)
    rule_judges = ("prefeval.classification",)
    request_format = PrefEvalFormat()
    probed_items = ("check",)
    probe_kinds = prefeval_probes.KINDS

    @classmethod
    def probe_answers(cls, instances: list[Instance], n: int, seed: int) -> tuple[list[AgentOutput], Labels]:
        return prefeval_probes.prefeval_probe_answers(instances, n, seed)

    @classmethod
    def read_source(cls, source: Path, params: PrefEvalParams) -> None:
        sel = params.selection()
        read_all(source, sel)
        read_inter_turns(source, max(sel.inter_turns))

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        if source is None:
            raise InputError("benchmark 'prefeval'", f"needs `source:`, the release's benchmark_dataset folder; {GUIDE}")
        instances, documents, info = build_release(source, self.params.selection(), seed)
        instances = sample_by_user(instances, sample, seed)
        users = {i.user_id for i in instances} | {CORPUS_OWNER}
        documents = [d for d in documents if d.owner in users]
        # the release's counts (as selected) and the sample's apart: `release` is before sampling, `sample` after
        info["sample"] = {"preferences": len(users) - 1, **counts(instances), "documents": len(documents)}
        return BenchmarkData(instances, documents, info)

    def stats(self, instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
        return dataset_tables(instances, documents)

    def analyze(self, scores: pd.DataFrame, instances: list[Instance]) -> dict[str, Any]:
        return analyze(scores, instances)
