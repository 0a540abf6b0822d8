"""An oracle for IBA-Bench: reads the ground-truth evidence tags of the user's history.

It never sees the instance's gold; it reads `Document.meta` of the history
(the evidence turns the constructor wrote, or a release's `evidence` tags) and,
per dimension, takes the value of the latest evidence turn, which is how a
dynamic preference resolves. It is the upper reference of the rule-scored
CallAPI check: it must score far above the no-history agent.

It needs nothing from perseval's taxonomy, so it runs on any release: an API
slot is filled from the evidence dimension of the same name, else from the one
dimension whose latest value is among the slot's allowed values; the taxonomy
only lends readable names to the text answer when it knows the scenario.
"""
from __future__ import annotations

import json
import re
from typing import Any

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.actions import open_slots
from perseval.benchmarks.iba.qa import dimension_name, known_scenario, value_label
from perseval.benchmarks.iba.views import IbaPayload
from perseval.kernel.capabilities import Capability
from perseval.core.instances import AgentOutput, Document, Instance, instant
from perseval.kernel.registry import register_agent


def latest_evidence(documents: list[Document], scenario: str) -> dict[str, dict[str, Any]]:
    """Dimension -> the signal (dimension, value, ...) of its latest evidence turn of `scenario`.

    A turn tagged with another scenario is skipped; an untagged evidence turn (a release may
    leave `scenario` out) counts for every scenario of its user.
    """
    order = sorted(enumerate(documents), key=lambda p: (instant(p[1].timestamp), p[0]))
    latest: dict[str, dict[str, Any]] = {}
    for _, doc in order:
        if doc.meta.get("scenario") not in (scenario, "", None):
            continue
        # one turn may carry evidence for several dimensions (table2 mode): read every signal
        for signal in doc.meta.get("supports") or [doc.meta]:
            if "dimension" in signal:
                latest[signal["dimension"]] = {**signal, "doc_id": doc.doc_id}
    return latest


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def slot_dimension(slot: dict[str, Any], values: dict[str, str]) -> tuple[str | None, str]:
    """The evidence dimension that fills `slot`, and how it was matched (name, value, or none)."""
    by_name = {_norm(dim): dim for dim in values}
    if _norm(slot["name"]) in by_name:
        return by_name[_norm(slot["name"])], "name"
    allowed = {_norm(v) for v in slot.get("values") or []}
    hits = [dim for dim, v in values.items() if _norm(v) in allowed]
    if len(hits) == 1:  # two dimensions with fitting values would be a guess
        return hits[0], "value"
    return None, "none"


def fill_slots(api: dict[str, Any], values: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Task-fixed slots as given, open slots from the latest evidence; the trace of each open slot."""
    parsed: dict[str, Any] = dict(api.get("task_fixed", {}))
    trace = []
    for slot in open_slots(api):
        dim, how = slot_dimension(slot, values)
        if dim is not None:
            parsed[slot["name"]] = values[dim]
        trace.append({"slot": slot["name"], "dimension": dim, "matched_by": how})
    return parsed, trace


@register_agent("iba.oracle")
class IbaOracleAgent(Agent):
    benchmarks = ("iba",)
    needs = frozenset({Capability.DOCUMENTS})  # the history's meta, not the instance gold

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.documents is not None
        payload = IbaPayload.of(instance)
        scenario_name = payload.scenario
        latest = latest_evidence(ctx.documents(instance.user_id), scenario_name)
        values = {dim: str(signal["value"]) for dim, signal in latest.items()}
        trace: list[dict[str, Any]] = [{"step": "oracle_evidence", "evidence": [
            {"doc_id": sig["doc_id"], "dimension": dim, "value": sig["value"], "phase": sig.get("dynamic_phase")}
            for dim, sig in latest.items()]}]
        if payload.is_api_call:
            parsed, slots = fill_slots(payload.api, values)
            trace.append({"step": "oracle_slots", "slots": slots})
            return AgentOutput(instance.instance_id, name, repeat, json.dumps(parsed), parsed=parsed, trace=trace)
        scenario = known_scenario(scenario_name)  # None for a release's own scenario: ids stay as they are
        lines = [f"- {dimension_name(scenario, dim)}: {value_label(scenario, dim, v) or v}" for dim, v in values.items()]
        text = "Following your usual preferences:\n" + "\n".join(lines)
        return AgentOutput(instance.instance_id, name, repeat, text, trace=trace)
