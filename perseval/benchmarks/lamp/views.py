"""LaMP's instance views. Payload: the task (LaMP-<n>), the question's full input (the instance's query is the
retrieval query cut from it), the setting and split it came from, the profile's size. Gold: the output."""
from __future__ import annotations

from perseval.benchmarks.views import GoldView, PayloadView


class LampPayload(PayloadView):
    task: str
    input: str
    setting: str
    split: str
    profile_size: int


class LampGold(GoldView):
    output: str
