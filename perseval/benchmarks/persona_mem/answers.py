"""PersonaMem's request format: the user's question with its four options; the answer is one letter.

Agents ask under a JSON schema ({"answer": "a"|"b"|"c"|"d"}); `extract` reads that, and otherwise reads a
free-text answer the way the official evaluation does: the part after a `<final_answer>` tag if there is
one, then the options named in parentheses, "(c)", else as bare letters; exactly one distinct option must
be named, else the answer is a problem (an invalid output, which the rule judge scores as a miss).
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from perseval.agents.contract import Answer, Prompt, RequestFormat
from perseval.benchmarks.persona_mem.layout import LETTERS
from perseval.core.parsing import extract_json
from perseval.core.instances import Instance, Passage
from perseval.benchmarks.persona_mem.views import PersonaMemPayload
from perseval.benchmarks.persona_mem.card import (EXCERPT_TEMPLATE, EXCERPTS_TEMPLATE, OPTION_TEMPLATE, QUESTION_TEMPLATE,
                                                WITH_EXCERPTS_TEMPLATE)

FINAL = "<final_answer>"
ANSWER_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "string", "enum": list(LETTERS)}},
                                 "required": ["answer"]}
_PARENS = re.compile(r"\(([a-d])\)")
_BARE = re.compile(r"\b([a-d])\b")


def options_block(instance: Instance) -> str:
    return "\n".join(OPTION_TEMPLATE.format(letter=letter, text=text)
                     for letter, text in zip(LETTERS, PersonaMemPayload.of(instance).options))


def question_message(instance: Instance, excerpts: Sequence[str] | None = None) -> dict[str, str]:
    """The final user turn: optional excerpts of the earlier conversation, the question, the options."""
    question = QUESTION_TEMPLATE.format(question=instance.query, options=options_block(instance))
    if excerpts:
        block = EXCERPTS_TEMPLATE.format(excerpts="\n".join(EXCERPT_TEMPLATE.format(excerpt=e) for e in excerpts))
        question = WITH_EXCERPTS_TEMPLATE.format(excerpts_block=block, question=instance.query,
                                                 options=options_block(instance))
    return {"role": "user", "content": question}


def read_letter(text: str) -> str | None:
    """The one option `text` names, or None (none, or several)."""
    value = extract_json(text)
    if isinstance(value, dict) and isinstance(value.get("answer"), str):
        letter = value["answer"].strip().strip("()").lower()
        return letter if letter in LETTERS else None
    tail = text.split(FINAL)[-1].replace("</final_answer>", "").lower()
    for found in (set(_PARENS.findall(tail)), set(_BARE.findall(tail))):
        if found:
            return found.pop() if len(found) == 1 else None
    return None


def extract(instance: Instance, text: str) -> Answer:
    letter = read_letter(text)
    if letter is None:
        return Answer(None, "no single option (a)-(d) in the answer")
    return Answer({"choice": letter})


class PersonaMemFormat(RequestFormat):
    """Retrieved passages as excerpts before the question (none: the question alone)."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        excerpts = [p.text[:passage_chars] for p in passages]
        return Prompt([question_message(instance, excerpts)], ANSWER_SCHEMA)

    def extract(self, instance: Instance, text: str) -> Answer:
        return extract(instance, text)
