"""Reading the official PersonaMem files row by row; every bad row is an InputError naming file, row and field.

Rows are counted from 1: the CSV's first question row (after the header) is row 1, the JSONL's first line
is row 1. A question becomes an Instance (user = persona_id, or the shared context when a file has no
persona_id column; group = question_type; gold = the correct letter); every message of a shared context a kept question reads becomes a Document of that persona, with
its position in the context (`meta.index`), so agents can cut the context at the question's end index.
"""
from __future__ import annotations

import ast
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perseval.benchmarks.persona_mem.layout import (LETTERS, OPTIONAL_FLOAT, OPTIONAL_INT, PERSONA_COLUMN,
                                                    QUESTION_COLUMNS, QUESTION_TYPES, REQUIRED, ROLES, contexts_file,
                                                    questions_file)
from perseval.core import files
from perseval.core.errors import InputError
from perseval.core.instances import Document, Instance
from perseval.benchmarks.persona_mem.views import PersonaMemPayload

BENCHMARK = "persona_mem"
_LETTERED = re.compile(r"\(([a-dA-D])\)\s*")
Message = dict[str, str]


@dataclass
class Release:
    """The questions (in file order) and the shared contexts they read, by id."""

    instances: list[Instance]
    contexts: dict[str, list[Message]]
    n_rows: int


def _fail(path: Path, row: int, field: str, message: str) -> InputError:
    return InputError(path, message, row=row, field=field)


def read_contexts(path: Path) -> dict[str, list[Message]]:
    """shared_context_id -> its messages, checked line by line."""
    out: dict[str, list[Message]] = {}
    first: dict[str, int] = {}
    for row, line in files.utf8_lines(path, missing="missing: the shared contexts of this split (one JSON object "
                                                    "per line)"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _fail(path, row, "shared_context_id", f"not a JSON object: {files.json_problem(exc)}") from None
        if not isinstance(obj, dict) or len(obj) != 1:
            raise _fail(path, row, "shared_context_id", "expected one object with exactly one key, the "
                                                        "shared_context_id")
        [(sid, messages)] = obj.items()
        if sid in out:
            raise _fail(path, row, "shared_context_id", f"duplicate shared_context_id {sid!r} (first at row "
                                                        f"{first[sid]})")
        if not isinstance(messages, list) or not messages:
            raise _fail(path, row, sid, "expected a non-empty list of messages")
        out[sid] = [_message(path, row, sid, i, m) for i, m in enumerate(messages)]
        first[sid] = row
    return out


def _message(path: Path, row: int, sid: str, i: int, m: Any) -> Message:
    where = f"{sid}[{i}]"
    if not isinstance(m, dict):
        raise _fail(path, row, where, "expected a message object with role and content")
    role, content = m.get("role"), m.get("content")
    if role not in ROLES:
        raise _fail(path, row, f"{where}.role", f"{role!r:.40} is not one of {list(ROLES)}")
    if not isinstance(content, str):
        raise _fail(path, row, f"{where}.content", "missing or not a string")
    return {"role": role, "content": content}


def parse_options(text: str) -> list[str] | None:
    """The four option texts of `all_options`: a list literal of four strings (each may start with its
    "(a) " label) or one string with the labels (a)..(d) in order. None when it is neither."""
    value: Any = None
    for reader in (json.loads, ast.literal_eval):
        try:
            value = reader(text)
            break
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    if isinstance(value, list):
        if len(value) != len(LETTERS) or not all(isinstance(v, str) for v in value):
            return None
        return [_LETTERED.sub("", v, count=1).strip() if _LETTERED.match(v.strip()) else v.strip() for v in value]
    parts = _LETTERED.split(text)
    labels, texts = [p.lower() for p in parts[1::2]], [p.strip() for p in parts[2::2]]
    return texts if tuple(labels) == LETTERS and all(texts) else None


def parse_letter(text: str) -> str | None:
    value = text.strip().strip("()").strip().lower()
    return value if value in LETTERS else None


def _int(path: Path, row: int, raw: dict[str, str], field: str, low: int = 0) -> int:
    value = (raw.get(field) or "").strip()
    try:
        number: float | None = float(value) if value else None
    except ValueError:
        number = None
    if number is None or not number.is_integer() or number < low:
        raise _fail(path, row, field, f"{value!r:.40} is not a whole number of {low} or more")
    return int(number)


def question_row(path: Path, row: int, raw: dict[str, str], contexts: dict[str, list[Message]],
                 question_column: str = QUESTION_COLUMNS[0]) -> Instance:
    for field in (*REQUIRED, question_column):
        if not (raw.get(field) or "").strip():
            raise _fail(path, row, field, "missing")
    qtype = raw["question_type"].strip()
    if qtype not in QUESTION_TYPES:
        raise _fail(path, row, "question_type", f"{qtype!r:.60} is not one of the seven query types "
                                                f"{list(QUESTION_TYPES)}")
    options = parse_options(raw["all_options"])
    if options is None:
        raise _fail(path, row, "all_options", "expected four options (a)-(d): a list of four strings or one "
                                              "string labelled (a) (b) (c) (d)")
    answer = parse_letter(raw["correct_answer"])
    if answer is None:
        raise _fail(path, row, "correct_answer", f"{raw['correct_answer']!r:.20} is not one of (a) (b) (c) (d)")
    sid = raw["shared_context_id"].strip()
    if sid not in contexts:
        raise _fail(path, row, "shared_context_id", f"{sid!r:.60} is not in the shared contexts file")
    end = _int(path, row, raw, "end_index_in_shared_context", 1)
    if end > len(contexts[sid]):
        raise _fail(path, row, "end_index_in_shared_context", f"{end} is past the end of shared context "
                                                              f"{sid!r:.40} ({len(contexts[sid])} messages)")
    payload: dict[str, Any] = {
        "options": options, "topic": raw["topic"].strip(), "shared_context_id": sid, "end_index": end,
        "distance_blocks": _int(path, row, raw, "distance_to_ref_in_blocks"),
        "distance_tokens": _int(path, row, raw, "distance_to_ref_in_tokens")}
    for field in OPTIONAL_INT:
        if (raw.get(field) or "").strip():
            payload[field] = _int(path, row, raw, field)
    for field in OPTIONAL_FLOAT:
        if (raw.get(field) or "").strip():
            text = raw[field].strip()
            try:  # a share, or a percentage ("97.80%") as some files write it
                payload[field] = float(text[:-1]) / 100 if text.endswith("%") else float(text)
            except ValueError:
                raise _fail(path, row, field, f"{raw[field]!r:.40} is not a number") from None
    persona = (raw.get(PERSONA_COLUMN) or "").strip() or sid
    return Instance(f"pm-{raw['question_id'].strip()}", BENCHMARK, persona, qtype, raw[question_column].strip(),
                    payload, {"answer": answer})


def read_release(source: Path, split: str) -> Release:
    """Both files of `split` under `source`, checked; the questions in file order."""
    contexts = read_contexts(contexts_file(source, split))
    path = questions_file(source, split)
    instances: list[Instance] = []
    first: dict[str, int] = {}
    header, rows = files.csv_rows(path, missing=f"missing: the questions of split {split!r} (see "
                                               "docs/benchmarks/persona_mem.md)")
    question_column = next((c for c in QUESTION_COLUMNS if c in header), QUESTION_COLUMNS[0])
    missing = [c for c in (*REQUIRED, question_column) if c not in header]
    if missing:
        raise InputError(path, f"the header lacks the columns {missing}", row=0, field=missing[0])
    n = 0
    for n, raw in rows:
        inst = question_row(path, n, raw, contexts, question_column)
        if inst.instance_id in first:
            raise _fail(path, n, "question_id", f"duplicate question_id {raw['question_id']!r} (first at row "
                                                f"{first[inst.instance_id]})")
        first[inst.instance_id] = n
        instances.append(inst)
    if not instances:
        raise InputError(path, "no question rows")
    return Release(instances, contexts, n)


def sample_questions(instances: list[Instance], sample: int, seed: int) -> list[Instance]:
    """A seeded subset of `sample` questions in file order (all of them when there are fewer)."""
    if sample <= 0 or len(instances) <= sample:
        return list(instances)
    keep = set(random.Random(f"{seed}:persona_mem").sample(range(len(instances)), sample))
    return [q for i, q in enumerate(instances) if i in keep]


def context_documents(instances: list[Instance], contexts: dict[str, list[Message]]) -> list[Document]:
    """One document per message of every (persona, shared context) the questions read, in context order.

    `meta.session` counts the sessions of a context: a system message opens a new one."""
    out: list[Document] = []
    seen: set[tuple[str, str]] = set()
    for inst in instances:
        pair = (inst.user_id, PersonaMemPayload.of(inst).shared_context_id)
        if pair in seen:
            continue
        seen.add(pair)
        session = 0
        for i, m in enumerate(contexts[pair[1]]):
            if m["role"] == "system" and i > 0:
                session += 1
            out.append(Document(pair[0], f"{pair[1]}#{i:05d}", f"{m['role'].capitalize()}: {m['content']}",
                                meta={"context": pair[1], "index": i, "role": m["role"], "session": session}))
    return out
