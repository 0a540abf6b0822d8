"""The official LongLaMP release layout (docs/benchmarks/longlamp.md).

The release is the Hugging Face dataset `LongLaMP/LongLaMP`: one configuration per task and setting,
`<task>_<setting>` (abstract_generation, product_review, topic_writing x user, temporal), each with the
splits train, val and test. `source:` points at a folder holding one file per configuration and split,
`<source>/<task>_<setting>/<split>.json`, as the `datasets` library saves it (`Dataset.to_json`: one row
a line) or as one JSON list (`.jsonl` is read too). Each row: the user's id under the task's own name
(`name`, `reviewerId`, `author`), `input` (the task's instruction), `output` (the user's own text, the
gold) and `profile` (the user's earlier items, whose fields differ by task). The email task (Avocado) is
not in the public release.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SPLITS = ("train", "val", "test")
SETTINGS = ("user", "temporal")  # the user-based and the temporal split
SUFFIXES = (".json", ".jsonl")


@dataclass(frozen=True)
class TaskSpec:
    name: str  # the release's configuration prefix, as `tasks:` names it
    paper: str  # the paper's name of the task (its tables' columns)
    user_field: str  # the row's user id field
    fields: tuple[str, ...]  # what every profile item holds (a string or a number)
    required: tuple[str, ...]  # those of `fields` that may not be empty
    date_field: str = ""  # the item's date, when the release gives one


TASKS: dict[str, TaskSpec] = {t.name: t for t in (
    TaskSpec("abstract_generation", "Abstract Generation", "name", ("title", "abstract"), ("title", "abstract"),
             "year"),
    TaskSpec("product_review", "Review Writing", "reviewerId", ("overall", "summary", "reviewText", "description"),
             ("overall", "reviewText")),
    TaskSpec("topic_writing", "Topic Writing", "author", ("summary", "content"), ("summary", "content")),
)}


def task_file(source: Path, task: str, setting: str, split: str) -> Path:
    """The file of `task`'s `split` in `setting`: the first suffix that exists (`.json` when none does)."""
    folder = source / f"{task}_{setting}"
    candidates = [folder / f"{split}{suffix}" for suffix in SUFFIXES]
    return next((c for c in candidates if c.is_file()), candidates[0])
