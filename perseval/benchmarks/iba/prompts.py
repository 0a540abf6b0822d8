"""Prompts of the IBA-Bench judge and of the RAG agents, written for perseval; the texts are the card's
(perseval.benchmarks.iba.card).

Kept short on purpose: the embedded default model is small and slow, so every
prompt token costs wall time.
"""
from __future__ import annotations


from typing import Any

from perseval.benchmarks.iba.card import (AGENT_SYSTEM, API_TEMPLATE, GENERATE_TEMPLATE, HISTORY_TEMPLATE,
                                        JUDGE_INSTRUCTION, JUDGE_TEMPLATE, OPTIONS_TEMPLATE, PASSAGE_TEMPLATE,
                                        SLOT_JUDGE_INSTRUCTION, SLOT_JUDGE_TEMPLATE, SLOT_TEMPLATE)
from perseval.judges.quoting import data_rule, quote
from perseval.core.instances import Passage

MAX_RESPONSE_CHARS = 6000  # the judges' default clip: keeps a judge prompt inside a small model's context

_JUDGE_SYSTEM = JUDGE_INSTRUCTION + " " + data_rule("response") + " Reply with JSON only."


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
    user = JUDGE_TEMPLATE.format(task=task, response=quote("response", response), requirement=requirement)
    return [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": user}]


_AGENT_SYSTEM = AGENT_SYSTEM


def history_block(passages: list[Passage], max_chars: int | None) -> str:
    """Retrieved passages as a numbered list; empty when there are none (no-history agent)."""
    if not passages:
        return ""
    lines = [PASSAGE_TEMPLATE.format(i=i, text=p.text[:max_chars]) for i, p in enumerate(passages, 1)]
    return HISTORY_TEMPLATE.format(passages="\n".join(lines))


def generate_messages(task: str, passages: list[Passage], max_chars: int | None) -> list[dict[str, str]]:
    user = GENERATE_TEMPLATE.format(history=history_block(passages, max_chars), task=task)
    return [{"role": "system", "content": _AGENT_SYSTEM}, {"role": "user", "content": user}]


def api_messages(task: str, api: dict[str, Any], open_slots: list[dict[str, Any]], passages: list[Passage],
                 max_chars: int | None) -> list[dict[str, str]]:
    """Ask for the open (non task-fixed) slots of an API call as one JSON object."""
    fields = "\n".join(SLOT_TEMPLATE.format(name=s["name"], allowed=" | ".join(s["values"]) if s.get("values")
                                            else s.get("type", "string")) for s in open_slots)
    user = API_TEMPLATE.format(history=history_block(passages, max_chars), task=task, api=api["name"], slots=fields)
    return [{"role": "system", "content": _AGENT_SYSTEM}, {"role": "user", "content": user}]


def api_schema(open_slots: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON schema of the open slots: an enum wherever allowed values are known."""
    props: dict[str, Any] = {}
    for s in open_slots:
        props[s["name"]] = {"type": "string", "enum": list(s["values"])} if s.get("values") else {"type": "string"}
    return {"type": "object", "properties": props, "required": [s["name"] for s in open_slots]}


_SLOT_JUDGE_SYSTEM = SLOT_JUDGE_INSTRUCTION + " " + data_rule("value") + " Reply with JSON only."


def slot_judge_messages(task: str, api_name: str, slot: str, allowed: list[str], submitted: str,
                        preference: str) -> list[dict[str, str]]:
    """One binary CallAPI slot judgment (IBA-Bench C.2): is the submitted value of `slot` valid and consistent
    with the task and the user's preference? The value is quoted as data; the verdict first, then the reason."""
    options = OPTIONS_TEMPLATE.format(values=", ".join(allowed)) if allowed else ""
    user = SLOT_JUDGE_TEMPLATE.format(task=task, api=api_name, slot=slot, options=options,
                                      value=quote("value", submitted), preference=preference)
    return [{"role": "system", "content": _SLOT_JUDGE_SYSTEM}, {"role": "user", "content": user}]
