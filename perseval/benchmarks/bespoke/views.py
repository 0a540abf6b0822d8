"""Bespoke's instance views. The agent sees only the query (an empty payload); the gold holds the
information need, the atomic claims, the per-query rubric, the rated example responses (shots), the
held-out meta-test pairs, and for the meta-evaluation the rated response with its human scores."""
from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from perseval.benchmarks.views import GoldView, PayloadView


class BespokePayload(PayloadView):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BespokeGold(GoldView):
    need: str
    claims: list[str] = []
    rubric: Any = None
    shots: list[Any] = []
    meta_test: list[Any] = []
    task_type: str = ""
    query_id: str = ""


class HistoryGold(BespokeGold):
    """A bespoke-history query: the oracle's kept sessions (the relevant set), each of its decisions and
    how many sessions it judged, labelled when the data is built."""

    oracle: list[str] = []
    oracle_decisions: list[dict[str, Any]] = []
    sessions: int | None = None


class HumanRating(GoldView):
    score: float
    feedback: str | None = None


class MetaGold(BespokeGold):
    """A meta-test instance: one response with the human's score and feedback per criterion."""

    response: str
    human: dict[str, HumanRating]
