"""IBA-Bench's two action types as generic agents meet them: Generate(text), answered in free text, and
CallAPI(params), answered as one JSON object of the API's open slots. IBA-Bench and a user's own data (the
custom layout's free-text and API-call instances) both send and read them through `ActionFormat`; the
templates are the text the model receives (IBA-Bench's card and custom's name them).

The request: a system message, then the retrieved history (numbered passages under a heading; nothing for
a no-history agent) and the task; a CallAPI task adds the open slots, each with its allowed values, and asks
under a JSON schema. Kept short on purpose: the embedded default model is small and slow, so every prompt
token costs wall time.

A CallAPI answer is a JSON object of slot values; every agent that answers an API
task and the slot judge read it through `extract`, so one format has one parser:
task-fixed values are taken from the task, open slots are snapped to their allowed
values (case, quotes and space/hyphen/underscore do not matter). Generate and QA
answers are free text.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from perseval.agents.contract import Answer, Prompt, RequestFormat
from perseval.benchmarks.views import ActionPayload
from perseval.core.instances import AgentOutput, Instance, Passage
from perseval.core.parsing import extract_object

AGENT_SYSTEM = ("You are a personal assistant. The user's past messages reveal how they like things done; "
                "follow those habits when you carry out the task.")
PASSAGE_TEMPLATE = "[{i}] {text}"  # one retrieved passage, numbered from 1, cut to passage_chars
HISTORY_TEMPLATE = "Past messages:\n{passages}\n\n"  # "" when no passage was retrieved
GENERATE_TEMPLATE = "{history}Task: {task}"
SLOT_TEMPLATE = "- {name}: {allowed}"  # allowed values joined with " | " (else the slot's type)
API_TEMPLATE = ("{history}Task: {task}\n"
                "API call: {api}. Choose one allowed value for each field:\n{slots}\n"
                "Reply with one JSON object mapping each field to its value.")

_SEP = re.compile(r"[\s\-]+")


# --- the request ------------------------------------------------------------------------------------


def history_block(passages: list[Passage], max_chars: int | None) -> str:
    """Retrieved passages as a numbered list; empty when there are none (no-history agent)."""
    if not passages:
        return ""
    lines = [PASSAGE_TEMPLATE.format(i=i, text=p.text[:max_chars]) for i, p in enumerate(passages, 1)]
    return HISTORY_TEMPLATE.format(passages="\n".join(lines))


def generate_messages(task: str, passages: list[Passage], max_chars: int | None) -> list[dict[str, str]]:
    user = GENERATE_TEMPLATE.format(history=history_block(passages, max_chars), task=task)
    return [{"role": "system", "content": AGENT_SYSTEM}, {"role": "user", "content": user}]


def api_messages(task: str, api: dict[str, Any], open_slots: list[dict[str, Any]], passages: list[Passage],
                 max_chars: int | None) -> list[dict[str, str]]:
    """Ask for the open (non task-fixed) slots of an API call as one JSON object."""
    fields = "\n".join(SLOT_TEMPLATE.format(name=s["name"], allowed=" | ".join(s["values"]) if s.get("values")
                                            else s.get("type", "string")) for s in open_slots)
    user = API_TEMPLATE.format(history=history_block(passages, max_chars), task=task, api=api["name"], slots=fields)
    return [{"role": "system", "content": AGENT_SYSTEM}, {"role": "user", "content": user}]


def api_schema(open_slots: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON schema of the open slots: an enum wherever allowed values are known."""
    props: dict[str, Any] = {}
    for s in open_slots:
        props[s["name"]] = {"type": "string", "enum": list(s["values"])} if s.get("values") else {"type": "string"}
    return {"type": "object", "properties": props, "required": [s["name"] for s in open_slots]}


# --- reading the answer -----------------------------------------------------------------------------


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


class ActionFormat(RequestFormat):
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
