"""LaMP-QA's dataset table in the paper's layout: per category the questions (users), the profile sizes and
the rubric aspects per question."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

import pandas as pd

from perseval.benchmarks.lamp_qa.layout import CATEGORIES
from perseval.benchmarks.lamp_qa.views import LampQaGold, LampQaPayload
from perseval.core.records import Document, Instance


def by_category(instances: list[Instance], documents: Iterable[Document]) -> pd.DataFrame:
    items = Counter(d.owner for d in documents)
    rows = []
    for category in CATEGORIES:
        mine = [i for i in instances if i.group == category]
        if not mine:
            continue
        sizes = pd.Series([LampQaPayload.of(i).profile_size for i in mine], dtype=float)
        aspects = pd.Series([len(LampQaGold.of(i).aspects) for i in mine], dtype=float)
        rows.append({"category": category, "questions": len(mine), "users": len({i.user_id for i in mine}),
                     "profile_mean": sizes.mean(), "profile_std": sizes.std(ddof=0),
                     "aspects_mean": aspects.mean(), "aspects_std": aspects.std(ddof=0),
                     "profile_items_loaded": sum(items[i.user_id] for i in mine)})
    return pd.DataFrame(rows).set_index("category") if rows else pd.DataFrame()


def dataset_tables(instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
    return {"questions_by_category": by_category(instances, documents)}
