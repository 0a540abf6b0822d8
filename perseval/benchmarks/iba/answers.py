"""IBA-Bench answers: the task format generic agents use, and the one extraction of API calls.

A CallAPI answer is a JSON object of slot values; every agent that answers an API
task and the slot judge read it through `extract`, so one format has one parser:
task-fixed values are taken from the task, open slots are snapped to their allowed
values (case, quotes and space/hyphen/underscore do not matter). Generate and QA
answers are free text.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from perseval.agents.contract import Answer, Prompt, TaskFormat
from perseval.benchmarks.iba.prompts import api_messages, api_schema, generate_messages
from perseval.benchmarks.iba.views import ActionPayload
from perseval.core.parsing import extract_object
from perseval.core.instances import AgentOutput, Instance, Passage

_SEP = re.compile(r"[\s\-]+")


def normalize_slot(value: Any) -> str:
    """Case, surrounding quotes/space and space-vs-hyphen-vs-underscore do not matter."""
    text = str(value).strip().strip("'\"").strip().lower()
    return _SEP.sub("_", text)


def canonical_slot(value: Any, allowed: list[str]) -> Any:
    """The allowed value `value` normalizes to, else `value` unchanged (the judge then gives 0)."""
    norm = normalize_slot(value)
    for a in allowed:
        if normalize_slot(a) == norm:
            return a
    return value


def is_api_task(instance: Instance) -> bool:
    return ActionPayload.of(instance).is_api_call


def open_slots(api: dict[str, Any]) -> list[dict[str, Any]]:
    """Slots the agent must decide: every slot whose value the task does not fix."""
    fixed = api.get("task_fixed", {})
    return [s for s in api["slots"] if s["name"] not in fixed]


def parse_api_call(text: str, api: dict[str, Any]) -> dict[str, Any] | None:
    """Task-fixed values plus the open slots found in the answer (snapped to allowed values); None if no JSON."""
    obj = extract_object(text)
    if obj is None:
        return None
    parsed: dict[str, Any] = dict(api.get("task_fixed", {}))
    for slot in open_slots(api):
        if slot["name"] in obj:
            parsed[slot["name"]] = canonical_slot(obj[slot["name"]], slot.get("values") or [])
    return parsed


def extract(instance: Instance, text: str) -> Answer:
    view = ActionPayload.of(instance)
    if not view.is_api_call:
        return Answer(None, "" if text.strip() else "empty answer")
    parsed = parse_api_call(text, view.api)
    return Answer(parsed, "" if parsed is not None else "no JSON object in the answer")


def submitted_slots(instance: Instance, output: AgentOutput) -> dict[str, Any] | None:
    """The API call an output submits: what its agent extracted, else the same extraction of its text."""
    if output.status != "ok":
        return None
    return output.parsed if output.parsed is not None else extract(instance, output.text).parsed


class IbaTask(TaskFormat):
    """Generate/QA: the task with the retrieved history; CallAPI: the open slots as one JSON object."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        view = ActionPayload.of(instance)
        if view.is_api_call:
            api = view.api
            slots = open_slots(api)
            return Prompt(api_messages(instance.query, api, slots, list(passages), passage_chars), api_schema(slots))
        return Prompt(generate_messages(instance.query, list(passages), passage_chars))

    def extract(self, instance: Instance, text: str) -> Answer:
        return extract(instance, text)
