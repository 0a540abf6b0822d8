"""IBA-Bench's instance views. Payload: the scenario, the action type (Generate(text), CallAPI(params), or a
QA twin), the API's slots for CallAPI, and the counts the analyses slice by. Gold: the hidden checkpoints
(Generate) or personal slot values (CallAPI), the preferences behind them, the persona and task case."""
from __future__ import annotations

from typing import Any

from perseval.benchmarks.views import GoldView, ScenarioPayload


class IbaPayload(ScenarioPayload):
    action_type: str
    api: dict[str, Any] | None = None
    n_evidence: int | None = None
    n_constraints: int | None = None
    dynamic: bool | None = None


class IbaGold(GoldView):
    checkpoints: list[dict[str, Any]] = []
    slots: dict[str, Any] = {}
    preferences: list[dict[str, Any]] = []
    n_dynamic: int = 0
    persona: dict[str, Any] = {}
