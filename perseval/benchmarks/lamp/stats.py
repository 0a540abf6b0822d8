"""LaMP's dataset table in the paper's layout: per task, the questions (users) and the profile sizes."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

import pandas as pd

from perseval.benchmarks.lamp.layout import TASKS
from perseval.benchmarks.lamp.views import LampPayload
from perseval.core.records import Document, Instance


def by_task(instances: list[Instance], documents: Iterable[Document]) -> pd.DataFrame:
    items = Counter(d.owner for d in documents)
    rows = []
    for task in TASKS:
        mine = [i for i in instances if i.group == task]
        if not mine:
            continue
        sizes = pd.Series([LampPayload.of(i).profile_size for i in mine], dtype=float)
        rows.append({"task": task, "kind": TASKS[task].kind, "questions": len(mine),
                     "users": len({i.user_id for i in mine}), "profile_mean": sizes.mean(),
                     "profile_std": sizes.std(ddof=0), "profile_items_loaded": sum(items[i.user_id] for i in mine)})
    return pd.DataFrame(rows).set_index("task") if rows else pd.DataFrame()


def dataset_tables(instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
    return {"questions_by_task": by_task(instances, documents)}
