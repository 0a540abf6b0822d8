"""Reading the official LaMP files of one task and split; every bad row is an InputError naming file, row and
field. Rows are counted from 1 in each file's list (questions) or `golds` list (outputs).

A question becomes an Instance: its user is the question's own profile (LaMP gives every question the
profile of the user who asked it, and no user id across questions), its group is the task, its query is
the paper's retrieval query; every profile item becomes a Document of that user whose text is the item in
the task's pattern (perseval.benchmarks.lamp.prompts), with the item's date when it has one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from perseval.benchmarks.lamp.layout import TASKS, TaskSpec, outputs_file, questions_file, task_folder
from perseval.benchmarks.lamp.prompts import item_text, retrieval_query
from perseval.benchmarks.profile_questions import TaskData, read_json, read_questions, row_error as _fail
from perseval.core import files
from perseval.core.errors import InputError
from perseval.core.instances import Document, Instance

BENCHMARK = "lamp"
HINT = "see docs/benchmarks/lamp.md for where to get the release and its layout"


def _ident(value: Any) -> str | None:
    return str(value).strip() if isinstance(value, (str, int)) and str(value).strip() else None


def _item(path: Path, row: int, k: int, raw: Any, task: TaskSpec) -> dict[str, Any]:
    where = f"profile[{k}]"
    if not isinstance(raw, dict):
        raise _fail(path, row, where, "expected a profile item object")
    for field in task.fields:
        value = raw.get(field)
        if not isinstance(value, (str, int, float)) or isinstance(value, bool) or not str(value).strip():
            raise _fail(path, row, f"{where}.{field}", f"missing; every {task.name} profile item has "
                                                        f"{list(task.fields)}")
    if task.kind == "rating" and str(raw["score"]).strip() not in task.labels:
        raise _fail(path, row, f"{where}.score", f"{raw['score']!r:.20} is not one of {list(task.labels)}")
    return raw


def read_golds(path: Path, task: TaskSpec) -> dict[str, str]:
    """question id -> gold output of `<split>_outputs.json`."""
    value = read_json(path, f"the gold outputs of this split ({HINT}; the test split's golds are not public)")
    if not isinstance(value, dict) or not isinstance(value.get("golds"), list):
        raise InputError(path, 'expected an object {"task": ..., "golds": [{"id", "output"}, ...]}', field="golds")
    if value.get("task") not in (None, task.folder, task.name):
        raise InputError(path, f"holds task {value.get('task')!r:.30}, expected {task.folder!r}", field="task")
    golds: dict[str, str] = {}
    for row, raw in enumerate(value["golds"], 1):
        qid = _ident(raw.get("id")) if isinstance(raw, dict) else None
        if qid is None:
            raise _fail(path, row, "id", "missing")
        output = raw.get("output")
        if not isinstance(output, (str, int, float)) or isinstance(output, bool) or not str(output).strip():
            raise _fail(path, row, "output", "missing; expected the gold output text")
        if task.labels and str(output).strip() not in task.labels:
            raise _fail(path, row, "output", f"{output!r:.40} is not one of {list(task.labels)}")
        if qid in golds:
            raise _fail(path, row, "id", f"duplicate id {qid!r}")
        golds[qid] = str(output).strip()
    return golds


def question(path: Path, row: int, raw: Any, task: TaskSpec, golds: dict[str, str], where: tuple[str, str]
             ) -> tuple[Instance, list[Document]]:
    """One question row as an Instance and its profile's documents; `where`: (setting, split)."""
    if not isinstance(raw, dict):
        raise _fail(path, row, "id", "expected a question object with id, input and profile")
    qid = _ident(raw.get("id"))
    if qid is None:
        raise _fail(path, row, "id", "missing")
    text = raw.get("input")
    if not isinstance(text, str) or not text.strip():
        raise _fail(path, row, "input", files.wrong_kind(raw, "input", "a string (the question's input text)"))
    profile = raw.get("profile")
    if not isinstance(profile, list):  # "missing" only where it is: an object there is said to be one
        raise _fail(path, row, "profile", files.wrong_kind(raw, "profile", "a list (the user's profile items)"))
    items = [_item(path, row, k, p, task) for k, p in enumerate(profile)]
    if qid not in golds:
        raise _fail(path, row, "id", f"{qid!r} has no gold output in {outputs_file(path.parent, where[1]).name}")
    user = f"{task.name}-{where[0]}-{qid}"
    payload = {"task": task.name, "input": text, "setting": where[0], "split": where[1], "profile_size": len(items)}
    inst = Instance(f"lamp-{task.name[5:]}-{where[0]}-{where[1]}-{qid}", BENCHMARK, user, task.name,
                    retrieval_query(task.name, text, task.marker), payload, {"output": golds[qid]})
    docs = [Document(user, f"{user}#{k:04d}", item_text(task.name, p), str(p.get("date") or ""),
                     meta={"item_id": str(p.get("id", k))}) for k, p in enumerate(items)]
    return inst, docs


def read_task(source: Path, task: str, split: str, setting: str) -> TaskData:
    """Both files of `task`'s `split` in the user- or time-based `setting`, checked row by row."""
    spec = TASKS[task]
    folder = task_folder(source, task, split, setting)
    if not folder.is_dir():  # the folder is named, not the first file looked for in it
        gone = next(p for p in (*reversed(folder.parents), folder) if p.is_relative_to(source) and not p.is_dir())
        raise InputError(gone, f"missing folder: the {setting}-based {split} split of {task} is read from {folder}; "
                               f"{HINT}")
    golds = read_golds(outputs_file(folder, split), spec)
    path = questions_file(folder, split)
    rows = read_json(path, f"the questions of {task} ({setting}-based {split} split); {HINT}")
    return read_questions(path, task, rows, lambda row, raw: question(path, row, raw, spec, golds, (setting, split)))


