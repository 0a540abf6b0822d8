"""What LaMP, LaMP-QA and LongLaMP share, below them: question files whose every question carries its user's
profile.

The `tasks:` check, reading one file of questions (a JSON list, one instance per row, a repeated id refused
naming both rows), a seeded sample of questions with their profiles, one passage per profile item for the
prompt, the per-group dataset row, and every per-instance mean with its user-clustered interval per system.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pandas as pd

from perseval.benchmarks.base import BenchmarkData, gather
from perseval.core import files
from perseval.core.errors import InputError
from perseval.core.instances import Document, Instance, Passage
from perseval.metrics.ci_tables import ci_long, instance_level


def row_error(path: Path, row: int, field: str, message: str) -> InputError:
    return InputError(path, message, row=row, field=field)


_fail = row_error


def known_distinct(value: list[str], known: Iterable[str]) -> list[str]:
    """`value` (a `tasks:` list) when every name is `known` and none repeats; ValueError otherwise."""
    names = list(known)
    unknown = [t for t in value if t not in names]
    if unknown:
        raise ValueError(f"unknown tasks {unknown}; known: {names}")
    if len(set(value)) != len(value):
        raise ValueError("lists a task twice")
    return value


@dataclass
class TaskData:
    """One task's split: its questions in file order, with every profile item as a document."""

    task: str
    instances: list[Instance]
    documents: list[Document]
    n_rows: int


def read_json(path: Path, missing: str) -> Any:
    """The JSON value of `path`; InputError naming the file (missing, not UTF-8, not JSON: with its line, JSON
    Lines)."""
    return files.read_json(path, missing=f"missing: {missing}")


def read_questions(path: Path, name: str, rows: Any,
                   question_of: Callable[[int, Any], tuple[Instance, list[Document]]]) -> TaskData:
    """The questions of one file (a non-empty JSON list), each built by `question_of(row, raw)`; a repeated id
    is refused naming both rows."""
    if not isinstance(rows, list) or not rows:
        raise InputError(path, "expected a non-empty JSON list of questions")
    instances, documents, first = [], [], {}
    for row, raw in enumerate(rows, 1):
        inst, docs = question_of(row, raw)
        if inst.instance_id in first:
            raise _fail(path, row, "id", f"duplicate id (first at row {first[inst.instance_id]})")
        first[inst.instance_id] = row
        instances.append(inst)
        documents += docs
    return TaskData(name, instances, documents, len(rows))


def sample_questions(data: TaskData, sample: int, seed: int) -> TaskData:
    """A seeded subset of `sample` questions (users) of one task, in file order, with their profiles."""
    if sample <= 0 or len(data.instances) <= sample:
        return data
    keep = set(random.Random(f"{seed}:lamp:{data.task}").sample(range(len(data.instances)), sample))
    instances = [q for i, q in enumerate(data.instances) if i in keep]
    users = {i.user_id for i in instances}
    return TaskData(data.task, instances, [d for d in data.documents if d.owner in users], data.n_rows)


def question_data(groups: dict[str, TaskData], info: dict[str, Any]) -> BenchmarkData:
    """Every group's questions with their profiles, in order; `info` gains, per group (by the name it is keyed
    on), its questions in the file and kept, then the totals of instances, users and documents."""
    instances, documents = gather((data.instances, data.documents) for data in groups.values())
    for name, data in groups.items():
        info[f"{name}_questions_in_file"] = data.n_rows
        info[f"{name}_questions"] = len(data.instances)
    info.update(instances=len(instances), users=len({i.user_id for i in instances}), documents=len(documents))
    return BenchmarkData(instances, documents, info)


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


def distinct(passages: Sequence[Passage]) -> list[Passage]:
    """One passage per profile item (its first chunk), in rank order."""
    seen: set[str] = set()
    out = []
    for p in passages:
        if p.doc_id not in seen:
            seen.add(p.doc_id)
            out.append(p)
    return out


SYSTEM = ["agent", "backbone", "retriever", "judge"]


def system_labels(frame: pd.DataFrame) -> pd.Series:
    return pd.Series([" / ".join(str(v) for v in row if isinstance(v, str) and v and v != "-")
                      for row in frame[SYSTEM].itertuples(index=False)], index=frame.index, dtype=object)


def intervals(scores: pd.DataFrame) -> pd.DataFrame:
    """Per system, task and metric: the mean over instances with its user-clustered interval."""
    sub = scores[scores["value"].notna()]
    sub = sub.assign(system=system_labels(sub), task=sub["group"])
    inst = instance_level(sub, ["system", "task", "metric"])
    return ci_long(inst, ["system", "task", "metric"])


