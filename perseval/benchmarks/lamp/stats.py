"""LaMP's dataset table in the paper's layout: per task, the questions (users) and the profile sizes."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable

import pandas as pd

from perseval.benchmarks.lamp.layout import TASKS
from perseval.benchmarks.lamp.views import LampPayload
from perseval.core.records import Document, Instance


def group_rows(instances: list[Instance], documents: Iterable[Document], groups: Iterable[str], label: str,
               profile_size: Callable[[Instance], int],
               extra: Callable[[str, list[Instance]], dict[str, Any]]) -> pd.DataFrame:
    """Per group (task, category) that has instances: its questions, users, profile sizes (mean, population
    std) and the profile items loaded, with `extra(group, its instances)` beside them."""
    items = Counter(d.owner for d in documents)
    rows = []
    for group in groups:
        mine = [i for i in instances if i.group == group]
        if not mine:
            continue
        sizes = pd.Series([profile_size(i) for i in mine], dtype=float)
        rows.append({label: group, **extra(group, mine), "questions": len(mine),
                     "users": len({i.user_id for i in mine}), "profile_mean": sizes.mean(),
                     "profile_std": sizes.std(ddof=0), "profile_items_loaded": sum(items[i.user_id] for i in mine)})
    return pd.DataFrame(rows).set_index(label) if rows else pd.DataFrame()


def by_task(instances: list[Instance], documents: Iterable[Document]) -> pd.DataFrame:
    return group_rows(instances, documents, TASKS, "task", lambda i: LampPayload.of(i).profile_size,
                      lambda task, _: {"kind": TASKS[task].kind})


def dataset_tables(instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
    return {"questions_by_task": by_task(instances, documents)}
