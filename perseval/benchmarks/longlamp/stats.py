"""LongLaMP's dataset table in the paper's layout: per task, the rows (users), the profile sizes and the mean length
in words of the inputs and of the outputs (the gold texts; with its population std)."""
from __future__ import annotations

from typing import Iterable

import pandas as pd

from perseval.benchmarks.longlamp.layout import TASKS
from perseval.benchmarks.longlamp.views import LongLampGold, LongLampPayload
from perseval.benchmarks.profile_questions import group_rows
from perseval.core.instances import Document, Instance


def _lengths(task: str, mine: list[Instance]) -> dict[str, object]:
    inputs = pd.Series([len(LongLampPayload.of(i).input.split()) for i in mine], dtype=float)
    outputs = pd.Series([len(LongLampGold.of(i).output.split()) for i in mine], dtype=float)
    return {"paper": TASKS[task].paper, "input_words": inputs.mean(), "output_words": outputs.mean(),
            "output_words_std": outputs.std(ddof=0)}


def by_task(instances: list[Instance], documents: Iterable[Document]) -> pd.DataFrame:
    return group_rows(instances, documents, TASKS, "task", lambda i: LongLampPayload.of(i).profile_size, _lengths)


def dataset_tables(instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
    return {"rows_by_task": by_task(instances, documents)}
