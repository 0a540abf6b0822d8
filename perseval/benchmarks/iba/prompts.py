"""Prompts of the IBA-Bench judge and of the RAG agents, written for perseval.

Kept short on purpose: the embedded default model is small and slow, so every
prompt token costs wall time.
"""
from __future__ import annotations


from typing import Any

from perseval.judges.quoting import data_rule, quote
from perseval.core.records import Passage

MAX_RESPONSE_CHARS = 6000  # the judges' default clip: keeps a judge prompt inside a small model's context

_JUDGE_SYSTEM = (
    "You grade whether a response meets one hidden user requirement. "
    "Judge only that requirement. " + data_rule("response") + " Reply with JSON only."
)


def clip_response(response: str, max_chars: int | None) -> str:
    """The response as the judge sees it: cut to `max_chars` (marked), or whole when None."""
    if max_chars is not None and len(response) > max_chars:
        return response[:max_chars] + " [...]"
    return response


def judge_messages(task: str, response: str, requirement: str,
                   max_chars: int | None = MAX_RESPONSE_CHARS) -> list[dict[str, str]]:
    """One binary checkpoint judgment: does `response` to `task` satisfy `requirement`? The response is
    quoted as data (cut to `max_chars`); the verdict is asked first, the reason after it."""
    response = clip_response(response, max_chars)
    user = (
        f"Task:\n{task}\n\n{quote('response', response)}\n\nRequirement:\n{requirement}\n\n"
        'Does the response meet the requirement? Answer {"verdict": true or false, "reason": "<one sentence>"}.'
    )
    return [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": user}]


_AGENT_SYSTEM = (
    "You are a personal assistant. The user's past messages reveal how they like things done; "
    "follow those habits when you carry out the task."
)


def history_block(passages: list[Passage], max_chars: int | None) -> str:
    """Retrieved passages as a numbered list; empty when there are none (no-history agent)."""
    if not passages:
        return ""
    lines = [f"[{i}] {p.text[:max_chars]}" for i, p in enumerate(passages, 1)]
    return "Past messages:\n" + "\n".join(lines) + "\n\n"


def generate_messages(task: str, passages: list[Passage], max_chars: int | None) -> list[dict[str, str]]:
    user = f"{history_block(passages, max_chars)}Task: {task}"
    return [{"role": "system", "content": _AGENT_SYSTEM}, {"role": "user", "content": user}]


def api_messages(task: str, api: dict[str, Any], open_slots: list[dict[str, Any]], passages: list[Passage],
                 max_chars: int | None) -> list[dict[str, str]]:
    """Ask for the open (non task-fixed) slots of an API call as one JSON object."""
    fields = "\n".join(
        f"- {s['name']}: " + (" | ".join(s["values"]) if s.get("values") else s.get("type", "string"))
        for s in open_slots
    )
    user = (
        f"{history_block(passages, max_chars)}Task: {task}\n"
        f"API call: {api['name']}. Choose one allowed value for each field:\n{fields}\n"
        "Reply with one JSON object mapping each field to its value."
    )
    return [{"role": "system", "content": _AGENT_SYSTEM}, {"role": "user", "content": user}]


def api_schema(open_slots: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON schema of the open slots: an enum wherever allowed values are known."""
    props: dict[str, Any] = {}
    for s in open_slots:
        props[s["name"]] = {"type": "string", "enum": list(s["values"])} if s.get("values") else {"type": "string"}
    return {"type": "object", "properties": props, "required": [s["name"] for s in open_slots]}


_SLOT_JUDGE_SYSTEM = (
    "You grade one parameter of an API call an assistant made for a user. "
    "Judge only that parameter. " + data_rule("value") + " Reply with JSON only."
)


def slot_judge_messages(task: str, api_name: str, slot: str, allowed: list[str], submitted: str,
                        preference: str) -> list[dict[str, str]]:
    """One binary CallAPI slot judgment (IBA-Bench C.2): is the submitted value of `slot` valid and consistent
    with the task and the user's preference? The value is quoted as data; the verdict first, then the reason."""
    options = f"Allowed values: {', '.join(allowed)}\n" if allowed else ""
    user = (
        f"Task:\n{task}\n\nAPI call: {api_name}\nParameter: {slot}\n{options}"
        f"{quote('value', submitted)}\n\nThe user's preference:\n{preference}\n\n"
        "Is the submitted value valid and consistent with the task and the user's preference? "
        'Answer {"verdict": true or false, "reason": "<one sentence>"}.'
    )
    return [{"role": "system", "content": _SLOT_JUDGE_SYSTEM}, {"role": "user", "content": user}]
