"""The contract every benchmark fulfils: build data, judge outputs, score instances."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from perseval.llm.base import ChatModel
from perseval.records import AgentOutput, Document, Instance, InstanceScore, Judgment


@dataclass
class BenchmarkData:
    """What the construct/ingest stage produces: instances plus every user's history."""

    instances: list[Instance]
    documents: list[Document]  # history items, and corpus passages (owner == CORPUS_OWNER)
    info: dict[str, Any] = field(default_factory=dict)  # counts and construction stats, logged to MLflow


@dataclass
class JudgeBinding:
    """A judge model bound to the judge role for one judge repeat."""

    name: str
    model: ChatModel
    repeat: int = 0


class Benchmark(ABC):
    """One benchmark: `params` is the `params:` mapping of its entry in the experiment file."""

    name: ClassVar[str]  # set by @register_benchmark
    headline_metric: ClassVar[str]
    group_label: ClassVar[str] = "group"  # what `Instance.group` means here (domain, task type...)
    uses_llm_judge: ClassVar[bool] = True  # False: rule scoring only, judge stage ignores the judges

    def __init__(self, params: dict[str, Any] | None = None):
        self.params = dict(params or {})

    @abstractmethod
    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        """Construct (seeded) or ingest (from `source`) the instances and histories.

        Must raise perseval.errors.InputError naming file, row and field on bad input.
        """

    @abstractmethod
    async def judge(self, instance: Instance, output: AgentOutput, judge: JudgeBinding | None) -> list[Judgment]:
        """Atomic judgments of one output. Unparseable judge answers: status='unscored', raw kept."""

    @abstractmethod
    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        """Instance-level metric values from the judgments of one (output, judge, judge repeat)."""

    def analyze(self, scores: pd.DataFrame, instances: list[Instance]) -> dict[str, Any]:
        """Cross-cell analyses of this benchmark (the paper's tables and figures).

        `scores` is the long frame of every instance score of every cell of this benchmark, with
        columns ANALYSIS_COLUMNS. Returns name -> pandas DataFrame (logged as CSV + Markdown) or
        matplotlib Figure (logged as PNG). Default: none.
        """
        return {}


# Columns of the frame Benchmark.analyze receives: one row per instance score of one cell.
ANALYSIS_COLUMNS = [
    "cell", "agent", "agent_kind", "agent_params", "backbone", "retriever", "judge",  # the cell
    "instance_id", "repeat", "judge_repeat", "group", "metric", "value", "n_items", "n_unscored",
]
