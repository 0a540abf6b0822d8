"""LaMP's dataset table in the paper's layout: per task, the questions (users) and the profile sizes."""
from __future__ import annotations

from typing import Iterable

import pandas as pd

from perseval.benchmarks.lamp.layout import TASKS
from perseval.benchmarks.lamp.views import LampPayload
from perseval.benchmarks.profile_questions import group_rows
from perseval.core.instances import Document, Instance


def by_task(instances: list[Instance], documents: Iterable[Document]) -> pd.DataFrame:
    return group_rows(instances, documents, TASKS, "task", lambda i: LampPayload.of(i).profile_size,
                      lambda task, _: {"kind": TASKS[task].kind})


def dataset_tables(instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
    return {"questions_by_task": by_task(instances, documents)}
