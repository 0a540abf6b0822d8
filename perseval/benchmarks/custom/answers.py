"""The task format of a user's own data: IBA-Bench's for free text and API calls, APeB's for rankings.

An instance's `payload.action_type` says which: `generate` and `call_api` are IBA's
action types (so IBA's prompts, slot extraction and slot judge read them as they
are), `rank` hands the instance to APeB's ranking prompt and its one extraction of
a ranked id list. Generic agents (`rag`, and its no-history variant) run on it.
"""
from __future__ import annotations

from typing import Sequence

from perseval.benchmarks.apeb.answers import ApebTask
from perseval.agents.contract import Answer, Prompt, TaskFormat
from perseval.benchmarks.custom.views import CustomPayload
from perseval.benchmarks.iba.answers import IbaTask
from perseval.core.instances import Instance, Passage

TEXT, API, RANKING = "generate", "call_api", "rank"
TYPE_NAMES = {TEXT: "free text", API: "API call", RANKING: "ranking"}


def action_type(instance: Instance) -> str:
    return CustomPayload.of(instance).action_type


class CustomTask(TaskFormat):
    """Delegates each instance to the format of the benchmark its type comes from."""

    def __init__(self) -> None:
        self.iba, self.apeb = IbaTask(), ApebTask()

    def _format(self, instance: Instance) -> TaskFormat:
        return self.apeb if action_type(instance) == RANKING else self.iba

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        return self._format(instance).prompt(instance, passages, passage_chars)

    def extract(self, instance: Instance, text: str) -> Answer:
        return self._format(instance).extract(instance, text)
