"""PrefEval's instance views. Payload: the preference form, topic and the document that states the preference,
the task (generation or classification), the inter-turns between preference and query, and for classification the
shuffled options; the release's further fields are kept. Gold: the stated preference and its explanation, and for
classification the correct option's letter."""
from __future__ import annotations

from perseval.benchmarks.views import GoldView, PayloadView


class PrefEvalPayload(PayloadView):
    form: str
    pref_doc: str
    task: str
    inter_turns: int
    topic: str | None = None  # written by the release, read by no one (the instance's group is the topic)
    options: list[str] | None = None


class PrefEvalGold(GoldView):
    preference: str
    explanation: str | None = None  # written by the release, read by no one
    answer: str | None = None
