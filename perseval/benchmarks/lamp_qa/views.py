"""LaMP-QA's instance views. Payload: the category (also the scenario the swapped-history control pairs users
within), the question, the split and the profile's size. Gold: the narrative (the asker's own detailed
description, which only the judge and the oracle read) and the rubric aspects."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perseval.benchmarks.views import GoldView, PayloadView


class LampQaPayload(PayloadView):
    category: str
    scenario: str  # = category: the swapped-history control gives each user another user's of its category
    question: str
    split: str
    profile_size: int


class Aspect(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    aspect: str
    reason: str
    evidence: str


class LampQaGold(GoldView):
    narrative: str
    aspects: list[Aspect]
