"""PersonaMem's instance views. Payload: the four options, topic, the shared context and where in it the question
is asked (end_index), the distance to the reference in blocks and tokens, and the optional length counts and
distance share. Gold: the correct option's letter."""
from __future__ import annotations

from perseval.benchmarks.views import GoldView, PayloadView


class PersonaMemPayload(PayloadView):
    options: list[str]
    topic: str
    shared_context_id: str
    end_index: int
    distance_blocks: int
    distance_tokens: int
    context_length_in_tokens: int | None = None
    context_length_in_letters: int | None = None
    num_irrelevant_tokens: int | None = None
    distance_to_ref_proportion_in_context: float | None = None


class PersonaMemGold(GoldView):
    answer: str
