"""An oracle for IBA-Bench: reads the ground-truth evidence tags of the user's history.

It never sees the instance's gold; it reads `Document.meta` of the history
(the evidence turns the constructor wrote) and, per dimension, takes the value
of the latest evidence turn, which is how a dynamic preference resolves. It is
the upper reference of the rule-scored CallAPI check: it must score far above
the no-history agent.
"""
from __future__ import annotations

import json
from typing import Any

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.iba.taxonomy import load_taxonomy
from perseval.records import AgentOutput, Document, Instance, instant
from perseval.registry import register_agent


def latest_evidence(documents: list[Document], scenario: str) -> dict[str, dict[str, Any]]:
    """Dimension -> the signal (dimension, value, ...) of its latest evidence turn of `scenario`."""
    order = sorted(enumerate(documents), key=lambda p: (instant(p[1].timestamp), p[0]))
    latest: dict[str, dict[str, Any]] = {}
    for _, doc in order:
        if doc.meta.get("scenario") != scenario:
            continue
        # one turn may carry evidence for several dimensions (table2 mode): read every signal
        for signal in doc.meta.get("supports") or [doc.meta]:
            if "dimension" in signal:
                latest[signal["dimension"]] = {**signal, "doc_id": doc.doc_id}
    return latest


@register_agent("iba.oracle")
class IbaOracleAgent(Agent):
    benchmarks = ("iba",)
    needs = frozenset({"documents"})  # the history's meta, not the instance gold

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        scenario = load_taxonomy().scenario(instance.payload["scenario"])
        assert ctx.documents is not None
        latest = latest_evidence(ctx.documents(instance.user_id), scenario.name)
        values = {dim: signal["value"] for dim, signal in latest.items()}
        trace: list[dict[str, Any]] = [{"step": "oracle_evidence", "evidence": [
            {"doc_id": sig["doc_id"], "dimension": dim, "value": sig["value"], "phase": sig.get("dynamic_phase")}
            for dim, sig in latest.items()]}]
        if scenario.api is not None and instance.payload.get("action_type") == "call_api":
            parsed: dict[str, Any] = dict(instance.payload["api"].get("task_fixed", {}))
            for slot in scenario.api.personal_slots:
                if slot.dimension in values:
                    parsed[slot.name] = values[slot.dimension]
            return AgentOutput(instance.instance_id, name, repeat, json.dumps(parsed), parsed=parsed, trace=trace)
        lines = [f"- {scenario.dimension(dim).name}: {scenario.dimension(dim).value(v).label}"
                 for dim, v in values.items()]
        text = "Following your usual preferences:\n" + "\n".join(lines)
        return AgentOutput(instance.instance_id, name, repeat, text, trace=trace)
