"""LongLaMP's request format: the paper's prompt with the chosen profile items, and the one answer extraction
(the text, stripped; an empty answer is invalid, and the rule judge scores it 0).

This module is the only one of the benchmark that imports the shared Prompt / Answer / RequestFormat.
"""
from __future__ import annotations

from typing import Sequence

from perseval.agents.contract import Answer, Prompt, RequestFormat
from perseval.benchmarks.longlamp.prompts import with_profile
from perseval.benchmarks.longlamp.views import LongLampPayload
from perseval.benchmarks.profile_questions import distinct
from perseval.core.instances import Instance, Passage


def extract(instance: Instance, text: str) -> Answer:
    return Answer({"answer": text.strip()}) if text.strip() else Answer(None, "an empty answer")


class LongLampFormat(RequestFormat):
    """The row's input with the retrieved profile items in the task's template (none: the input alone)."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        view = LongLampPayload.of(instance)
        items = [p.text[:passage_chars] for p in distinct(passages)]
        return Prompt([{"role": "user", "content": with_profile(view.task, view.input, items)}])

    def extract(self, instance: Instance, text: str) -> Answer:
        return extract(instance, text)
