"""`lamp`: LaMP's tasks from the official release files (`source:`; docs/benchmarks/lamp.md).

params:
  tasks     [LaMP-1, LaMP-2, LaMP-3, LaMP-4, LaMP-5, LaMP-7]  the tasks read (LaMP-6 only where `source:`
            holds the Avocado-built files, docs/benchmarks/lamp.md)
  split     dev (default) | train | test   (the test split's golds are not public)
  setting   user (default) | time          the user-based or the time-based split
`sample` is the number of questions (users) kept per task, seeded, in file order. Instances are grouped by
task; every question is its own user (the cluster of every interval), whose profile is that user's
history. The rule judge lamp.rule always runs; the run's analysis logs the paper's table.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Literal

import pandas as pd
from pydantic import Field, field_validator

from perseval.benchmarks.base import AnalysisInputs, Benchmark, BenchmarkData
from perseval.benchmarks.lamp.analysis import analyze
from perseval.benchmarks.lamp.answers import LampFormat
from perseval.benchmarks.lamp.layout import PUBLIC_TASKS, TASKS
from perseval.benchmarks.lamp.loader import read_task
from perseval.benchmarks.profile_questions import known_distinct, question_data, sample_questions
from perseval.benchmarks.lamp.stats import dataset_tables
from perseval.benchmarks.lamp.views import LampGold, LampPayload
from perseval.core.instances import Document, Instance
from perseval.kernel.params import Params
from perseval.kernel.registry import register_benchmark


class LampParams(Params):
    tasks: list[str] = Field(default_factory=lambda: list(PUBLIC_TASKS), min_length=1)
    split: Literal["train", "dev", "test"] = "dev"
    setting: Literal["user", "time"] = "user"

    @field_validator("tasks")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return known_distinct(value, TASKS)


# With no `source:`, the hand-written sample in the official layout that ships in this folder (a few users per
# task, written for perseval, not taken from the release): enough to run the pipeline, not to measure.
SAMPLE = Path(__file__).parent / "sample"


@register_benchmark("lamp")
class Lamp(Benchmark[LampParams]):
    Payload, Gold = LampPayload, LampGold
    headline_metric = "score"
    group_label = "task"
    rule_judges = ("lamp.rule",)
    request_format = LampFormat()

    @classmethod
    def read_source(cls, source: Path, params: LampParams) -> None:
        for task in params.tasks:
            read_task(source, task, params.split, params.setting)

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        p = self.params
        info: dict[str, Any] = {"source": str(source) if source else "bundled sample (not the release)",
                                "split": p.split, "setting": p.setting}
        return question_data({task: sample_questions(read_task(source or SAMPLE, task, p.split, p.setting), sample,
                                                     seed) for task in p.tasks}, info)

    def stats(self, instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
        return dataset_tables(instances, documents)

    def analyze_run(self, inputs: AnalysisInputs) -> dict[str, Any]:
        return analyze(inputs.scores, inputs.instances, inputs.judgments)
