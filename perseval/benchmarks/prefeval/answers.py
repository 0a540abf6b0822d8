"""PrefEval's request format: the question as it is (generation) or with four options (classification).

Generation answers are free text; the generation judge reads them (an empty answer is a problem, an
invalid output). A classification answer is one letter A-D: under the JSON schema {"choice": "A".."D"},
else from a `<choice>B</choice>` tag or a single bare letter; anything else is a problem.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from perseval.agents.contract import Answer, Prompt, RequestFormat
from perseval.benchmarks.prefeval.layout import CLASSIFICATION, LETTERS
from perseval.core.parsing import extract_json
from perseval.core.instances import Instance, Passage
from perseval.benchmarks.prefeval.views import PrefEvalPayload
from perseval.benchmarks.prefeval.card import (CONTEXT_INTRO, EXCERPT_TEMPLATE, MCQ_INSTRUCTION, OPTION_TEMPLATE,
                                             REMINDER, WORD_LIMIT)

CHOICE_SCHEMA: dict[str, Any] = {"type": "object",
                                 "properties": {"choice": {"type": "string", "enum": list(LETTERS)}},
                                 "required": ["choice"]}
_TAG = re.compile(r"<choice>\s*\(?([A-Da-d])\)?\s*</choice>")
_BARE = re.compile(r"\b([A-D])\b")


def is_classification(instance: Instance) -> bool:
    return PrefEvalPayload.of(instance).task == CLASSIFICATION


def question_text(instance: Instance, *, reminder: bool = False, excerpts: Sequence[str] | None = None,
                  word_limit: int | None = None) -> str:
    """The final user turn: optional retrieved exchanges, the question (a generation question with the
    official "(Please respond within N words.)" when `word_limit` is N), the reminder, the options."""
    parts = []
    if excerpts:
        lines = [EXCERPT_TEMPLATE.format(k=k, excerpt=e) for k, e in enumerate(excerpts, 1)]
        parts.append(CONTEXT_INTRO + "\n" + "\n".join(lines))
    limit = f" {WORD_LIMIT.format(n=word_limit)}" if word_limit and not is_classification(instance) else ""
    parts.append(instance.query + limit)
    if reminder:
        parts.append(REMINDER)
    if is_classification(instance):
        options = "\n".join(OPTION_TEMPLATE.format(letter=letter, text=text)
                            for letter, text in zip(LETTERS, PrefEvalPayload.of(instance).options))
        parts += [MCQ_INSTRUCTION, options]
    return "\n\n".join(parts)


def word_limit(params: Any) -> int | None:
    """The N of the word-limit request of an agent's params (its max_tokens), None when it is off."""
    return params.max_tokens if params.word_limit else None


def read_choice(text: str) -> str | None:
    value = extract_json(text)
    if isinstance(value, dict) and isinstance(value.get("choice"), str):
        letter = value["choice"].strip().strip("()").upper()
        return letter if letter in LETTERS else None
    tag = _TAG.search(text or "")
    if tag:
        return tag.group(1).upper()
    found = set(_BARE.findall(text or ""))
    return found.pop() if len(found) == 1 else None


def extract(instance: Instance, text: str) -> Answer:
    if is_classification(instance):
        letter = read_choice(text)
        return Answer({"choice": letter}) if letter else Answer(None, "no single option A-D in the answer")
    return Answer(None) if text.strip() else Answer(None, "empty response")


def schema(instance: Instance) -> dict[str, Any] | None:
    return CHOICE_SCHEMA if is_classification(instance) else None


class PrefEvalFormat(RequestFormat):
    """For the generic agents: retrieved passages as earlier exchanges, then the question."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        text = question_text(instance, excerpts=[p.text[:passage_chars] for p in passages])
        return Prompt([{"role": "user", "content": text}], schema(instance))

    def extract(self, instance: Instance, text: str) -> Answer:
        return extract(instance, text)
