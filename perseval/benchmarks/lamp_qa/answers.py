"""LaMP-QA's request format: the paper's prompt with the chosen profile items, and the one answer extraction.

The answer is free text (the paper asks for a JSON object with the answer in `personalized_answer`; a small
model keeps a long answer better as plain text, so perseval asks for the text and still reads such an object
when a model writes one). An empty answer is a problem: the judge scores it as covering no aspect.
"""
from __future__ import annotations

from typing import Sequence

from perseval.agents.contract import Answer, Prompt, RequestFormat
from perseval.benchmarks.lamp_qa.prompts import answer_messages
from perseval.benchmarks.lamp_qa.views import LampQaPayload
from perseval.benchmarks.profile_questions import distinct
from perseval.core.parsing import extract_object
from perseval.core.instances import Instance, Passage

ANSWER_KEYS = ("personalized_answer", "answer")


def answer_text(text: str) -> str:
    """The answer in `text`: the value under `personalized_answer` (or `answer`) of a JSON object that holds
    one, else the text itself, stripped."""
    obj = extract_object(text) if "{" in (text or "") else None
    value = next((obj[k] for k in ANSWER_KEYS if obj and isinstance(obj.get(k), str)), None)
    return (value if value is not None else text or "").strip()


def extract(text: str) -> Answer:
    answer = answer_text(text)
    return Answer({"answer": answer}) if answer else Answer(None, "an empty answer")


class LampQaFormat(RequestFormat):
    """The question with the retrieved profile items (one per post, its first chunk, in rank order)."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        items = [p.text[:passage_chars] for p in distinct(passages)]
        return Prompt(answer_messages(LampQaPayload.of(instance).question, items))

    def extract(self, instance: Instance, text: str) -> Answer:
        return extract(text)
