"""LaMP-QA's dataset table in the paper's layout: per category the questions (users), the profile sizes and
the rubric aspects per question."""
from __future__ import annotations

from typing import Iterable

import pandas as pd

from perseval.benchmarks.lamp_qa.layout import CATEGORIES
from perseval.benchmarks.lamp_qa.views import LampQaGold, LampQaPayload
from perseval.benchmarks.profile_questions import group_rows
from perseval.core.instances import Document, Instance


def by_category(instances: list[Instance], documents: Iterable[Document]) -> pd.DataFrame:
    def aspects(_: str, mine: list[Instance]) -> dict[str, float]:
        counts = pd.Series([len(LampQaGold.of(i).aspects) for i in mine], dtype=float)
        return {"aspects_mean": counts.mean(), "aspects_std": counts.std(ddof=0)}

    table = group_rows(instances, documents, CATEGORIES, "category", lambda i: LampQaPayload.of(i).profile_size,
                       aspects)
    return table[list(COLUMNS)] if len(table) else table


COLUMNS = ("questions", "users", "profile_mean", "profile_std", "aspects_mean", "aspects_std", "profile_items_loaded")


def dataset_tables(instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
    return {"questions_by_category": by_category(instances, documents)}
