"""The request format of a user's own data: IBA-Bench's actions for free text and API calls, the ranking
(APeB's request) for rankings.

An instance's `payload.action_type` says which: `generate` and `call_api` are IBA-Bench's
action types (perseval.benchmarks.actions: its prompts and slot extraction, read by the
slot judge as they are), `rank` hands the instance to the ranking prompt and its one
extraction of a ranked id list (perseval.benchmarks.rankings). Generic agents (`rag`, and
its no-history variant) run on it.
"""
from __future__ import annotations

from typing import Sequence

from perseval.agents.contract import Answer, Prompt, RequestFormat
from perseval.benchmarks.actions import ActionFormat
from perseval.benchmarks.custom.views import CustomPayload
from perseval.benchmarks.rankings import RankingFormat
from perseval.core.instances import Instance, Passage

TEXT, API, RANKING = "generate", "call_api", "rank"
TYPE_NAMES = {TEXT: "free text", API: "API call", RANKING: "ranking"}


def action_type(instance: Instance) -> str:
    return CustomPayload.of(instance).action_type


class CustomFormat(RequestFormat):
    """Delegates each instance to the format of its type."""

    def __init__(self) -> None:
        self.actions, self.ranking = ActionFormat(), RankingFormat()

    def _format(self, instance: Instance) -> RequestFormat:
        return self.ranking if action_type(instance) == RANKING else self.actions

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        return self._format(instance).prompt(instance, passages, passage_chars)

    def extract(self, instance: Instance, text: str) -> Answer:
        return self._format(instance).extract(instance, text)
