"""LaMP's request format: the paper's prompt with the chosen profile items, and the one answer extraction.

Classification and rating tasks ask under a JSON schema whose answer is one of the task's labels (a small
model then cannot answer outside the set); `read_label` reads that, and otherwise a free-text answer: the
whole answer when it is a label, else the one label it names (LaMP-2: a tag inside another named tag,
"comedy" in "dark comedy", does not count twice), else the first rating 1-5 it states (LaMP-3). An answer
naming no label, or several, is a problem: the rule judge scores it as the official evaluation scores an
answer outside the label set (a miss; the worst rating). A generation's answer is its text, stripped.

This module is the only one of the benchmark that imports the shared Prompt / Answer / RequestFormat.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from perseval.agents.contract import Answer, Prompt, RequestFormat
from perseval.benchmarks.lamp.layout import TASKS, TaskSpec
from perseval.benchmarks.lamp.prompts import with_profile
from perseval.benchmarks.lamp.views import LampPayload
from perseval.benchmarks.profile_questions import distinct
from perseval.core.parsing import extract_json
from perseval.core.instances import Instance, Passage

_RATING = re.compile(r"(?<![\d.])([1-5])(?:\.0+)?(?![\d.])")


def spec(instance: Instance) -> TaskSpec:
    return TASKS[LampPayload.of(instance).task]


def answer_schema(task: TaskSpec) -> dict[str, Any] | None:
    if task.kind == "generation":
        return None
    return {"type": "object", "properties": {"answer": {"type": "string", "enum": list(task.labels)}},
            "required": ["answer"]}


def _named(task: TaskSpec, text: str) -> list[str]:
    low = text.lower()
    found = [lab for lab in task.labels if re.search(rf"(?<![\w-]){re.escape(lab.lower())}(?![\w-])", low)]
    return [lab for lab in found if not any(lab != other and lab.lower() in other.lower() for other in found)]


def read_label(task: TaskSpec, text: str) -> str | None:
    """The label `text` gives for a classification or rating task, or None (none, or several)."""
    value = extract_json(text)
    if isinstance(value, dict) and isinstance(value.get("answer"), (str, int)):
        text = str(value["answer"])
    bare = text.strip().strip(".").strip()
    exact = {lab.lower(): lab for lab in task.labels}
    if bare.lower() in exact:
        return exact[bare.lower()]
    if task.kind == "rating":
        found = _RATING.search(text)
        return found.group(1) if found else None
    named = _named(task, text)
    return named[0] if len(named) == 1 else None


def extract(instance: Instance, text: str) -> Answer:
    task = spec(instance)
    if task.kind == "generation":
        return Answer({"answer": text.strip()}) if text.strip() else Answer(None, "an empty answer")
    label = read_label(task, text)
    if label is None:
        return Answer(None, f"no single label of {task.name} in the answer (allowed: {list(task.labels)})")
    return Answer({"answer": label})


class LampFormat(RequestFormat):
    """The question's input with the retrieved profile items in the task's pattern (none: the input alone)."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        view = LampPayload.of(instance)
        items = [p.text[:passage_chars] for p in distinct(passages)]
        message = {"role": "user", "content": with_profile(view.task, view.input, items)}
        return Prompt([message], answer_schema(TASKS[view.task]))

    def extract(self, instance: Instance, text: str) -> Answer:
        return extract(instance, text)
