"""The custom layout's instance views: one of three instance types (text with checkpoints, an API call with
slots, a ranking over candidates), each in the shape the shared checkpoint, slot and ranking judges read."""
from __future__ import annotations

from typing import Any

from perseval.benchmarks.views import ActionPayload, GoldView


class CustomPayload(ActionPayload):
    action_type: str
    candidates: list[dict[str, Any]] | None = None


class CustomGold(GoldView):
    checkpoints: list[dict[str, Any]] | None = None
    slots: dict[str, Any] | None = None
    purchased: str | None = None
