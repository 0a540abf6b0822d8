"""`longlamp`: LongLaMP's long-form tasks from the official release files (`source:`; docs/benchmarks/longlamp.md).

params:
  tasks     [abstract_generation, product_review, topic_writing]  the tasks read (the email task is not public)
  setting   user (default) | temporal    the user-based or the temporal split
  split     val (default) | train | test
`sample` is the number of rows (users) kept per task, seeded, in file order. Instances are grouped by task;
every row is its own user (the cluster of every interval), whose profile is that user's history. The rule
judge longlamp.rule always runs; the run's analysis logs the paper's table.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Literal

import pandas as pd
from pydantic import Field, field_validator

from perseval.benchmarks.base import AnalysisInputs, Benchmark, BenchmarkData
from perseval.benchmarks.longlamp.analysis import analyze
from perseval.benchmarks.longlamp.answers import LongLampFormat
from perseval.benchmarks.longlamp.layout import TASKS
from perseval.benchmarks.longlamp.loader import read_task
from perseval.benchmarks.longlamp.stats import dataset_tables
from perseval.benchmarks.longlamp.views import LongLampGold, LongLampPayload
from perseval.benchmarks.profile_questions import known_distinct, question_data, sample_questions
from perseval.core.instances import Document, Instance
from perseval.kernel.params import Params
from perseval.kernel.registry import register_benchmark


class LongLampParams(Params):
    tasks: list[str] = Field(default_factory=lambda: list(TASKS), min_length=1)
    setting: Literal["user", "temporal"] = "user"
    split: Literal["train", "val", "test"] = "val"

    @field_validator("tasks")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return known_distinct(value, TASKS)


# With no `source:`, the hand-written sample in the official layout that ships in this folder (a few users per
# task and setting, written for perseval, not taken from the release): enough to run the pipeline, not to measure.
SAMPLE = Path(__file__).parent / "sample"


@register_benchmark("longlamp")
class LongLamp(Benchmark[LongLampParams]):
    Payload, Gold = LongLampPayload, LongLampGold
    headline_metric = "score"
    group_label = "task"
    rule_judges = ("longlamp.rule",)
    request_format = LongLampFormat()

    @classmethod
    def read_source(cls, source: Path, params: LongLampParams) -> None:
        for task in params.tasks:
            read_task(source, task, params.setting, params.split)

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        p = self.params
        info: dict[str, Any] = {"source": str(source) if source else "bundled sample (not the release)",
                                "setting": p.setting, "split": p.split}
        return question_data({task: sample_questions(read_task(source or SAMPLE, task, p.setting, p.split), sample,
                                                     seed) for task in p.tasks}, info)

    def stats(self, instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
        return dataset_tables(instances, documents)

    def analyze_run(self, inputs: AnalysisInputs) -> dict[str, Any]:
        return analyze(inputs.scores)
