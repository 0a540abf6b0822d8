"""`persona_mem`: PersonaMem's multiple-choice questions from the official release files (`source:`).

params:
  split            32k (default) | 128k | 1M: which pair of files is read (questions_<split>.csv,
                   shared_contexts_<split>.jsonl)
  question_types   null (all seven) or a list of them
`sample` is the number of questions kept (a seeded subset, in file order; all of them when fewer).
Instances are grouped by query type; the user (the cluster of every interval) is the persona. The rule
judge persona_mem.choice always runs. The run's analysis logs accuracy per query type (the paper's
table) and by distance of the evidence from the question, with intervals, and the dataset tables.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Literal

import pandas as pd
from pydantic import field_validator

from perseval.benchmarks.base import Benchmark, BenchmarkData
from perseval.benchmarks.persona_mem.analysis import analyze
from perseval.benchmarks.persona_mem.answers import PersonaMemFormat
from perseval.benchmarks.persona_mem.layout import DEFAULT_SPLIT, QUESTION_TYPES
from perseval.benchmarks.persona_mem.loader import context_documents, read_release, sample_questions
from perseval.benchmarks.persona_mem.stats import dataset_tables
from perseval.core.errors import InputError
from perseval.core.instances import Document, Instance
from perseval.kernel.params import Params
from perseval.kernel.registry import register_benchmark
from perseval.benchmarks.persona_mem.views import PersonaMemGold, PersonaMemPayload

GUIDE = "see docs/benchmarks/persona_mem.md for where to get the release and its layout"


class PersonaMemParams(Params):
    split: Literal["32k", "128k", "1M"] = DEFAULT_SPLIT
    question_types: list[str] | None = None

    @field_validator("question_types")
    @classmethod
    def _known(cls, value: list[str] | None) -> list[str] | None:
        unknown = [t for t in value or [] if t not in QUESTION_TYPES]
        if unknown:
            raise ValueError(f"unknown query types {unknown}; known: {list(QUESTION_TYPES)}")
        return value


@register_benchmark("persona_mem")
class PersonaMem(Benchmark[PersonaMemParams]):
    Payload, Gold = PersonaMemPayload, PersonaMemGold
    headline_metric = "accuracy"
    group_label = "query type"
    rule_judges = ("persona_mem.choice",)
    request_format = PersonaMemFormat()

    @classmethod
    def read_source(cls, source: Path, params: PersonaMemParams) -> None:
        read_release(source, params.split)

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        if source is None:
            raise InputError("benchmark 'persona_mem'", f"needs `source:`, the folder of the release; {GUIDE}")
        release = read_release(source, self.params.split)
        wanted = self.params.question_types
        pool = [i for i in release.instances if wanted is None or i.group in wanted]
        instances = sample_questions(pool, sample, seed)
        documents = context_documents(instances, release.contexts)
        info: dict[str, Any] = {"source": str(source), "split": self.params.split, "questions_in_file": release.n_rows,
                                "instances": len(instances), "personas": len({i.user_id for i in instances}),
                                "shared_contexts": len({PersonaMemPayload.of(i).shared_context_id for i in instances}),
                                "documents": len(documents)}
        return BenchmarkData(instances, documents, info)

    def stats(self, instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
        return dataset_tables(instances, documents)

    def analyze(self, scores: pd.DataFrame, instances: list[Instance]) -> dict[str, Any]:
        return analyze(scores, instances)
