"""APeB's instance views: the agent sees the query level, the candidate set's label and its product cards;
the gold is the purchased product, the mined session and the history events a good trajectory draws on."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict

from perseval.benchmarks.views import GoldView, RankingPayload


class ApebPayload(RankingPayload):
    model_config = ConfigDict(extra="forbid", frozen=True)

    query_level: Literal["intent", "refined"]
    candidate_set: str  # "hard", "random" (or "hard-20" ... when a size is set)


class ApebGold(GoldView):
    model_config = ConfigDict(extra="forbid", frozen=True)

    purchased: str
    session: dict[str, Any]
    history_evidence: list[str] = []
