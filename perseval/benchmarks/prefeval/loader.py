"""Reading PrefEval's official files row by row; every bad row is an InputError naming file, row and field.

A file is a JSON array; its first element is row 1. A preference is one user of perseval (the cluster of
every interval): row n of a topic's explicit, implicit and classification files is the same preference
(user `<topic>-<n>`, perseval.benchmarks.prefeval.release). The turns that reveal a preference (its
explicit statement, or its implicit choice-based or persona-driven conversation) are that user's history
documents; the unrelated inter-turns are corpus documents (owner CORPUS_OWNER) every user's conversation
shares, turn i being messages 2i and 2i+1 of the file's conversations laid end to end (the official order).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perseval.benchmarks.prefeval.layout import (CHOICE, CHOICE_CONVERSATION, EXPLICIT, FORM_DIRS, INTER_TURNS_FILE,
                                                 MCQ_DIR)
from perseval.core import files
from perseval.core.errors import InputError
from perseval.core.instances import CORPUS_OWNER, Document

Message = dict[str, str]
# The assistant's reply to an explicitly stated preference, the same for every user and model (the
# official scripts let the tested model write it; a fixed reply keeps every agent's history identical).
ACKNOWLEDGEMENT = "Thank you for letting me know. I will keep that in mind."
_TURN = re.compile(r"^(?:turn)?(\d+)$")  # the release numbers turns "0", "1", ...; its README says turn1, ...


@dataclass
class PreferenceRow:
    """One row of a form's file: the preference, the question, and the turns that reveal the preference."""

    form: str
    topic: str
    row: int
    preference: str
    question: str
    explanation: str
    messages: list[Message]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class McqRow:
    topic: str
    row: int
    preference: str
    question: str
    options: list[str]  # the first follows the preference (the official convention)


def _fail(path: Path, row: int | None, fld: str | None, message: str) -> InputError:
    return InputError(path, message, row=row, field=fld)


class _Twice(dict):  # type: ignore[type-arg]
    """A JSON object in which a key is written twice (json keeps only the last value): `twice` names it."""

    twice: str


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    twice = None
    for key, value in pairs:
        twice = key if twice is None and key in out else twice
        out[key] = value
    if twice is None:
        return out
    marked = _Twice(out)
    marked.twice = twice
    return marked


def _written_twice(value: Any, where: str = "") -> str | None:
    """The dotted path of the first key written twice in `value`, or None."""
    if isinstance(value, _Twice):
        return f"{where}{value.twice}"
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = _written_twice(child, f"{where}{key}." if isinstance(value, dict) else f"{where.rstrip('.')}[{key}].")
        if found:
            return found
    return None


def read_array(path: Path) -> list[Any]:
    value = files.read_json(path, "missing (see docs/benchmarks/prefeval.md for the layout)", pairs=_pairs)
    if not isinstance(value, list):
        raise InputError(path, "expected a JSON array of rows")
    for row, raw in enumerate(value, 1):
        if (key := _written_twice(raw)) is not None:
            raise _fail(path, row, key, "written twice in one object (JSON would keep only the last); keep one")
    return value


def _text(path: Path, row: int, obj: dict[str, Any], key: str, required: bool = True) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise _fail(path, row, key, "missing; expected a non-empty string" if value in (None, "")
                    else f"expected a string, got {type(value).__name__}")
    return value.strip()


def _object(path: Path, row: int, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _fail(path, row, None, f"expected an object, got {type(raw).__name__}")
    return raw


def _choice_messages(path: Path, row: int, obj: dict[str, Any]) -> list[Message]:
    conv = obj.get("conversation")
    if not isinstance(conv, dict):
        raise _fail(path, row, "conversation", "missing; expected {query, assistant_options, user_selection, "
                                               "assistant_acknowledgment}")
    texts = [_text(path, row, conv, k) if isinstance(conv.get(k), str) else None for k in CHOICE_CONVERSATION]
    for k, t in zip(CHOICE_CONVERSATION, texts):
        if t is None:
            raise _fail(path, row, f"conversation.{k}", "missing; expected a non-empty string")
    roles = ("user", "assistant", "user", "assistant")
    return [{"role": r, "content": t} for r, t in zip(roles, texts)]  # type: ignore[misc]


def _same(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")


def _aligned_option(path: Path, row: int, obj: dict[str, Any]) -> str:
    """`aligned_op`, checked against `options` (the choices the implicit conversation offers) when the row has
    them: no task scores it, but one outside the options is a row whose conversation is not what it says."""
    aligned = _text(path, row, obj, "aligned_op")
    options = obj.get("options")
    if options is None:
        return aligned
    if not isinstance(options, list) or not options or not all(isinstance(o, str) and o.strip() for o in options):
        raise _fail(path, row, "options", "expected a non-empty list of non-empty strings")
    if _same(aligned) not in {_same(o) for o in options}:
        raise _fail(path, row, "aligned_op", f"{aligned!r:.80} is not one of the row's options "
                                             f"{[o.strip() for o in options]!r:.300}")
    return aligned


def _persona_messages(path: Path, row: int, obj: dict[str, Any]) -> list[Message]:
    conv = obj.get("conversation")
    if not isinstance(conv, dict) or not conv:
        raise _fail(path, row, "conversation", "missing; expected {0: {user, assistant}, 1: ...}")
    turns: list[tuple[int, dict[str, Any]]] = []
    keys: dict[int, str] = {}
    for key, turn in conv.items():
        m = _TURN.match(key)
        if not m:
            raise _fail(path, row, f"conversation.{key}", "unknown key; expected turn numbers 0, 1, ... (or turn1, ...)")
        if int(m.group(1)) in keys:  # "1" and "turn1" (or "01") are one turn: which comes first is unknowable
            raise _fail(path, row, f"conversation.{key}", f"turn {int(m.group(1))} is written twice, as "
                                                          f"conversation.{keys[int(m.group(1))]} and conversation.{key}; "
                                                          "keep one")
        keys[int(m.group(1))] = key
        if not isinstance(turn, dict):
            raise _fail(path, row, f"conversation.{key}", "expected {user, assistant}")
        for role in ("user", "assistant"):
            if not isinstance(turn.get(role), str) or not turn[role].strip():
                raise _fail(path, row, f"conversation.{key}.{role}", "missing; expected a non-empty string")
        turns.append((int(m.group(1)), turn))
    out: list[Message] = []
    for _, turn in sorted(turns, key=lambda t: t[0]):
        out += [{"role": "user", "content": turn["user"].strip()},
                {"role": "assistant", "content": turn["assistant"].strip()}]
    return out


def read_form(source: Path, form: str, topic: str) -> list[PreferenceRow]:
    path = source / FORM_DIRS[form] / f"{topic}.json"
    out = []
    for row, raw in enumerate(read_array(path), 1):
        obj = _object(path, row, raw)
        pref, question = _text(path, row, obj, "preference"), _text(path, row, obj, "question")
        explanation = _text(path, row, obj, "explanation", required=False)
        extra: dict[str, Any] = {}
        if form == EXPLICIT:
            messages = [{"role": "user", "content": pref}, {"role": "assistant", "content": ACKNOWLEDGEMENT}]
        elif form == CHOICE:
            messages = _choice_messages(path, row, obj)
            if obj.get("aligned_op") is not None:
                extra["aligned_option"] = _aligned_option(path, row, obj)
        else:
            messages = _persona_messages(path, row, obj)
            extra["persona"] = _text(path, row, obj, "persona", required=False)
        out.append(PreferenceRow(form, topic, row, pref, question, explanation, messages, extra))
    return out


def read_mcq(source: Path, topic: str) -> list[McqRow]:
    path = source / MCQ_DIR / f"{topic}.json"
    out = []
    for row, raw in enumerate(read_array(path), 1):
        obj = _object(path, row, raw)
        options = obj.get("classification_task_options")
        if not isinstance(options, list) or len(options) != 4 or \
                not all(isinstance(o, str) and o.strip() for o in options):
            raise _fail(path, row, "classification_task_options", "expected a list of four non-empty strings, "
                                                                  "the first the one that follows the preference")
        if len({o.strip() for o in options}) != 4:
            raise _fail(path, row, "classification_task_options", "two options are the same text")
        out.append(McqRow(topic, row, _text(path, row, obj, "preference"), _text(path, row, obj, "question"),
                          [o.strip() for o in options]))
    return out


def read_inter_turns(source: Path, turns: int) -> list[list[Message]]:
    """The first `turns` inter-turns: (user, assistant) message pairs of the conversations laid end to end."""
    path = source / INTER_TURNS_FILE
    if turns == 0:
        return []
    flat: list[tuple[int, int, Message]] = []
    for row, raw in enumerate(read_array(path), 1):
        obj = _object(path, row, raw)
        conv = obj.get("conversation")
        if not isinstance(conv, list):
            raise _fail(path, row, "conversation", "missing; expected a list of {role, content} messages")
        for i, m in enumerate(conv):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant") or \
                    not isinstance(m.get("content"), str):
                raise _fail(path, row, f"conversation[{i}]", "expected {role: user|assistant, content: string}")
            flat.append((row, i, {"role": m["role"], "content": m["content"]}))
        if len(flat) >= 2 * turns:
            break
    if len(flat) < 2 * turns:
        raise _fail(path, None, "conversation", f"holds {len(flat) // 2} turns; the inter-turn setting asks for "
                                                f"{turns}")
    out = []
    for t in range(turns):
        (row, i, user), (_, _, assistant) = flat[2 * t], flat[2 * t + 1]
        if user["role"] != "user" or assistant["role"] != "assistant":
            raise _fail(path, row, f"conversation[{i}].role", f"inter-turn {t + 1} must be a user message then an "
                                                              f"assistant message (the official pairing)")
        out.append([user, assistant])
    return out


def transcript(messages: list[Message]) -> str:
    return "\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages)


def inter_turn_documents(turns: list[list[Message]]) -> list[Document]:
    return [Document(CORPUS_OWNER, f"inter-{t:04d}", transcript(pair), meta={"turn": t, "messages": pair})
            for t, pair in enumerate(turns)]


def topics_in(source: Path, forms: list[str]) -> list[str]:
    """The topics of the first requested form's folder, sorted (every other form must have them too)."""
    folder = source / FORM_DIRS[forms[0]]
    files.require(folder, "missing: the folder of this preference form (see docs/benchmarks/prefeval.md)", "folder")
    topics = sorted(p.stem for p in folder.glob("*.json"))
    if not topics:
        raise InputError(folder, "no <topic>.json files")
    return topics
