"""Reading one official LaMP-QA file (one category's split); every bad row is an InputError naming the file,
the row (its position in the file's list, from 1) and the field.

A row becomes an Instance: its user is the row's own asker (the release gives every question the profile of
the user who asked it, and no user id across questions), its group is the category, its query is the
question (the paper retrieves with the question); every profile item becomes a Document of that user whose
text is the item's `text`, as the paper's prompt shows it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from perseval.benchmarks.lamp_qa.layout import ASPECT_FIELDS, CATEGORIES, category_file
from perseval.benchmarks.profile_questions import TaskData, read_json, read_questions
from perseval.core import files
from perseval.core.errors import InputError
from perseval.core.instances import Document, Instance

BENCHMARK = "lamp_qa"
HINT = "see docs/benchmarks/lamp_qa.md for where to get the release and its layout"


def _fail(path: Path, row: int, field: str, message: str) -> InputError:
    return InputError(path, message, row=row, field=field)


def _text(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _ident(value: Any) -> str | None:
    return str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip() \
        else None


def aspects(path: Path, row: int, value: Any) -> list[dict[str, str]]:
    """The row's rubric aspects, each with its three fields (non-empty strings)."""
    if not isinstance(value, list) or not value:
        raise _fail(path, row, "rubric_aspects", "missing or empty; expected a non-empty list of "
                                                 f"{{{', '.join(ASPECT_FIELDS)}}} objects")
    out = []
    for k, raw in enumerate(value):
        if not isinstance(raw, dict):
            raise _fail(path, row, f"rubric_aspects[{k}]", f"expected an object with {list(ASPECT_FIELDS)}")
        for field in ASPECT_FIELDS:
            if _text(raw, field) is None:
                raise _fail(path, row, f"rubric_aspects[{k}].{field}", "missing; expected a non-empty string")
        out.append({f: str(raw[f]).strip() for f in ASPECT_FIELDS})
    return out


def profile(path: Path, row: int, raw_row: dict[str, Any]) -> list[tuple[str, str]]:
    """The row's profile as (item id, text): every item an object with a non-empty `text`."""
    value = raw_row.get("profile")
    if not isinstance(value, list):
        raise _fail(path, row, "profile", files.wrong_kind(raw_row, "profile", "a list (the user's earlier posts)"))
    items = []
    for k, raw in enumerate(value):
        text = _text(raw, "text") if isinstance(raw, dict) else None
        if text is None:
            raise _fail(path, row, f"profile[{k}].text", "missing; every profile item is an object with a "
                                                         "non-empty 'text'")
        items.append((_ident(raw.get("id")) or str(k), text))
    return items


def question(path: Path, row: int, raw: Any, category: str, split: str) -> tuple[Instance, list[Document]]:
    """One row as an Instance and its profile's documents."""
    if not isinstance(raw, dict):
        raise _fail(path, row, "id", "expected a question object with id, question, narrative, rubric_aspects "
                                     "and profile")
    qid = _ident(raw.get("id"))
    if qid is None:
        raise _fail(path, row, "id", "missing")
    text = _text(raw, "question")
    if text is None:
        raise _fail(path, row, "question", "missing; expected the question's text")
    narrative = raw.get("narrative")
    if not isinstance(narrative, str):
        raise _fail(path, row, "narrative", "missing; expected the asker's description of the question "
                                            "(a string, may be empty)")
    rubric = aspects(path, row, raw.get("rubric_aspects"))
    items = profile(path, row, raw)
    user = f"{CATEGORIES[category]}-{qid}"
    payload = {"category": category, "scenario": category, "question": text, "split": split,
               "profile_size": len(items)}
    inst = Instance(f"lamp-qa-{split}-{user}", BENCHMARK, user, category, text, payload,
                    {"narrative": narrative.strip(), "aspects": rubric})
    docs = [Document(user, f"{user}#{k:04d}", t, meta={"item_id": i}) for k, (i, t) in enumerate(items)]
    return inst, docs


def read_category(source: Path, category: str, split: str) -> TaskData:
    """The file of `category`'s `split`, checked row by row (ids unique in the file); LaMP's TaskData with the
    category as its task, so LaMP's seeded `sample_questions` draws from it."""
    path = category_file(source, category, split)
    rows = read_json(path, f"the {split} split of {category} ({path.name}); {HINT}")
    return read_questions(path, category, rows, lambda row, raw: question(path, row, raw, category, split))

