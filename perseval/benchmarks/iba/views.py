"""IBA-Bench's instance views. Payload: the scenario, the action type (Generate(text), CallAPI(params), or a
QA twin), the API's slots for CallAPI, and the counts the analyses slice by. Gold: the hidden checkpoints
(Generate) or personal slot values (CallAPI), the preferences behind them, the persona and task case."""
from __future__ import annotations

from typing import Any

from perseval.benchmarks.views import ActionGold, ActionPayload, ScenarioPayload


class IbaPayload(ScenarioPayload, ActionPayload):
    action_type: str
    n_evidence: int | None = None
    n_constraints: int | None = None
    dynamic: bool | None = None  # None: the instance does not say
    base_instance: str | None = None  # a QA twin's task instance
    base_action_type: str | None = None  # and that task's action type


class IbaGold(ActionGold):
    preferences: list[dict[str, Any]] = []
    n_dynamic: int | None = None  # None: the instance does not say
    persona: dict[str, Any] = {}
    task_case: dict[str, Any] = {}  # the task's concrete details (LLM-mode construction keeps them)

    def shifted(self, dim_id: str) -> bool:
        """Whether the user's preference on `dim_id` changed over the history (a dynamic preference)."""
        return any(p.get("dimension") == dim_id and p.get("dynamic") for p in self.preferences)
