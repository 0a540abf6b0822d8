"""Reading one official LongLaMP file (one task's split in one setting); every bad row is an InputError naming
the file, the row and the field. Rows are counted from 1: the position in the file's JSON list, or the line
of a file written one row a line.

A row becomes an Instance: its user, the cluster of every interval, is the row itself (its profile is the
history of the user who wrote its output; the release's user id is kept in the payload as `author`), its
group is the task, its query the input. Every profile item becomes a Document of that user whose text is
the item in the task's template (perseval.benchmarks.longlamp.prompts), dated by its year where the
release gives one.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perseval.benchmarks.longlamp.layout import TASKS, TaskSpec, task_file
from perseval.benchmarks.longlamp.prompts import item_text
from perseval.benchmarks.profile_questions import TaskData, read_questions, row_error as _fail
from perseval.core import files
from perseval.core.errors import InputError
from perseval.core.instances import Document, Instance

BENCHMARK = "longlamp"
HINT = "see docs/benchmarks/longlamp.md for where to get the release and its layout"


def read_rows(path: Path, missing: str) -> list[Any]:
    """The rows of `path`: a JSON list, or one JSON row a line (what `datasets` writes); a line that is not
    JSON is an InputError naming its row."""
    text = files.read_text(path, missing=f"missing: {missing}")
    if text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"not JSON: {files.json_problem(exc, whole_file=True)}") from None
    rows = []
    for row, line in enumerate(text.splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(path, f"not a JSON row: {files.json_problem(exc)}", row=row) from None
    return rows


def _value(raw: Any) -> str | None:
    """A field's text (a string or a number, stripped), None when it is neither."""
    return str(raw).strip() if isinstance(raw, (str, int, float)) and not isinstance(raw, bool) else None


def _item(path: Path, row: int, k: int, raw: Any, task: TaskSpec) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _fail(path, row, f"profile[{k}]", f"expected a profile item object with {list(task.fields)}")
    for field in task.fields:
        value = _value(raw.get(field))
        if value is None or (field in task.required and not value):
            need = "non-empty " if field in task.required else ""
            raise _fail(path, row, f"profile[{k}].{field}", f"missing; every {task.name} profile item has a "
                                                           f"{need}{field!r} (of {list(task.fields)})")
    return raw


def _text(path: Path, row: int, raw: dict[str, Any], field: str, what: str) -> str:
    value = _value(raw.get(field))
    if not value:
        raise _fail(path, row, field, f"missing; expected {what}")
    return value


def row_instance(path: Path, row: int, raw: Any, task: TaskSpec, where: tuple[str, str]
                 ) -> tuple[Instance, list[Document]]:
    """One row as an Instance and its profile's documents; `where`: (setting, split)."""
    if not isinstance(raw, dict):
        raise _fail(path, row, "input", f"expected a row object with {task.user_field}, input, output and profile")
    author = _text(path, row, raw, task.user_field, "the user's id")
    text = _text(path, row, raw, "input", "the row's input text")
    output = _text(path, row, raw, "output", "the user's own text (the gold output)")
    profile = raw.get("profile")
    if not isinstance(profile, list):
        raise _fail(path, row, "profile", "missing; expected the list of the user's profile items")
    items = [_item(path, row, k, p, task) for k, p in enumerate(profile)]
    setting, split = where
    user = f"{task.name}-{setting}-{split}-{row}"
    payload = {"task": task.name, "input": text, "setting": setting, "split": split, "profile_size": len(items),
               "author": author}
    inst = Instance(f"longlamp-{user}", BENCHMARK, user, task.name, text, payload, {"output": output})
    docs = [Document(user, f"{user}#{k:04d}", item_text(task.name, {f: p[f] for f in task.fields}),
                     (_value(p.get(task.date_field)) or "") if task.date_field else "",
                     meta={"item_id": _value(p.get("id")) or str(k)}) for k, p in enumerate(items)]
    return inst, docs


def read_task(source: Path, task: str, setting: str, split: str) -> TaskData:
    """The file of `task`'s `split` in the user-based or temporal `setting`, checked row by row."""
    spec = TASKS[task]
    path = task_file(source, task, setting, split)
    rows = read_rows(path, f"the {split} split of {task} ({setting} setting); {HINT}")
    return read_questions(path, task, rows, lambda row, raw: row_instance(path, row, raw, spec, (setting, split)))
