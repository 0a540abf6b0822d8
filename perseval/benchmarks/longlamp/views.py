"""LongLaMP's instance views. Payload: the task, the row's input (also the retrieval query), the setting and
split it came from, the profile's size and the release's user id. Gold: the user's own text."""
from __future__ import annotations

from perseval.benchmarks.views import GoldView, PayloadView


class LongLampPayload(PayloadView):
    task: str
    input: str
    setting: str
    split: str
    profile_size: int
    author: str  # the row's user id as the release gives it (name, reviewerId or author)


class LongLampGold(GoldView):
    output: str
