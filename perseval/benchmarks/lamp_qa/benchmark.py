"""`lamp_qa`: LaMP-QA's questions from the official release files (`source:`; docs/benchmarks/lamp_qa.md).

params:
  categories  [Arts & Entertainment, Lifestyle & Personal Development, Society & Culture]  the categories read
  split       test (default) | validation | train
`sample` is the number of questions (users) kept per category, seeded, in file order. Instances are grouped by
category; every question is its own user (the cluster of every interval), whose profile is that user's
earlier posts. A judge YAML without `kind` binds its model to lamp_qa.aspects, the paper's per-aspect judge;
its probes state a question's aspects (each should score high), answer nothing, or state another user's
aspects of the same category (each of this question's aspects should score low).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Literal

import pandas as pd
from pydantic import Field, field_validator

from perseval.benchmarks import probes
from perseval.benchmarks.base import AnalysisInputs, Benchmark, BenchmarkData
from perseval.benchmarks.lamp_qa.analysis import analyze
from perseval.benchmarks.lamp_qa.answers import LampQaFormat
from perseval.benchmarks.lamp_qa.judges.aspects import aspect_id
from perseval.benchmarks.lamp_qa.layout import CATEGORIES
from perseval.benchmarks.lamp_qa.loader import read_category
from perseval.benchmarks.lamp_qa.stats import dataset_tables
from perseval.benchmarks.lamp_qa.views import LampQaGold, LampQaPayload
from perseval.benchmarks.profile_questions import question_data, sample_questions
from perseval.core.instances import Document, Instance
from perseval.kernel.params import Params
from perseval.kernel.registry import register_benchmark


Category = Literal["Arts & Entertainment", "Lifestyle & Personal Development", "Society & Culture"]


class LampQaParams(Params):
    categories: list[Category] = Field(default_factory=lambda: list(CATEGORIES), min_length=1)
    split: Literal["train", "validation", "test"] = "test"

    @field_validator("categories")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("lists a category twice")
        return value


# With no `source:`, the hand-written sample in the official layout that ships in this folder (the test split:
# two users in each category, written for perseval, not taken from the release): enough to run the pipeline.
SAMPLE = Path(__file__).parent / "sample"


@register_benchmark("lamp_qa")
class LampQa(Benchmark[LampQaParams]):
    Payload, Gold = LampQaPayload, LampQaGold
    headline_metric = "score"
    group_label = "category"
    llm_judges = ("lamp_qa.aspects",)
    request_format = LampQaFormat()
    probed_items = ("aspect",)

    @classmethod
    def read_source(cls, source: Path, params: LampQaParams) -> None:
        for category in params.categories:
            read_category(source, category, params.split)

    @classmethod
    def known_items(cls, instance: Instance) -> list[probes.KnownItem]:
        """Each rubric aspect stated as a point of an answer (its title and why it matters); value: the title."""
        return [(aspect_id(k), f"{a.aspect}: {a.reason}", a.aspect)
                for k, a in enumerate(LampQaGold.of(instance).aspects)]

    @classmethod
    def wrong_user_fails(cls, item_id: str, value: str, theirs: dict[str, tuple[str, str]]) -> bool:
        """Another user's aspects fail every aspect of this question they do not share by title."""
        return value.casefold() not in {v.casefold() for _, v in theirs.values()}

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        p = self.params
        info: dict[str, Any] = {"source": str(source) if source else "bundled sample (not the release)",
                                "split": p.split}
        return question_data({CATEGORIES[category]: sample_questions(read_category(source or SAMPLE, category, p.split),
                                                                     sample, seed) for category in p.categories}, info)

    def stats(self, instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
        return dataset_tables(instances, documents)

    def analyze_run(self, inputs: AnalysisInputs) -> dict[str, Any]:
        return analyze(inputs.scores)
