"""PersonaMem's task format: the user's question with its four options; the answer is one letter.

Agents ask under a JSON schema ({"answer": "a"|"b"|"c"|"d"}); `extract` reads that, and otherwise reads a
free-text answer the way the official evaluation does: the part after a `<final_answer>` tag if there is
one, then the options named in parentheses, "(c)", else as bare letters; exactly one distinct option must
be named, else the answer is a problem (an invalid output, which the rule judge scores as a miss).
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from perseval.agents.contract import Answer, Prompt, TaskFormat
from perseval.benchmarks.persona_mem.layout import LETTERS
from perseval.core.parsing import extract_json
from perseval.core.records import Instance, Passage
from perseval.benchmarks.persona_mem.views import PersonaMemPayload

FINAL = "<final_answer>"
ANSWER_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "string", "enum": list(LETTERS)}},
                                 "required": ["answer"]}
INSTRUCTION = ("Choose the reply that fits me best, given everything you know about me from our earlier "
               "conversations. Answer with the letter of one option only.")
_PARENS = re.compile(r"\(([a-d])\)")
_BARE = re.compile(r"\b([a-d])\b")


def options_block(instance: Instance) -> str:
    return "\n".join(f"({letter}) {text}" for letter, text in zip(LETTERS, PersonaMemPayload.of(instance).options))


def question_message(instance: Instance, excerpts: Sequence[str] | None = None) -> dict[str, str]:
    """The final user turn: optional excerpts of the earlier conversation, the question, the options."""
    parts = []
    if excerpts:
        parts.append("Excerpts of our earlier conversations:\n" + "\n".join(f"- {e}" for e in excerpts))
    parts += [instance.query, INSTRUCTION, options_block(instance)]
    return {"role": "user", "content": "\n\n".join(parts)}


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


class PersonaMemTask(TaskFormat):
    """Retrieved passages as excerpts before the question (none: the question alone)."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        excerpts = [p.text[:passage_chars] for p in passages]
        return Prompt([question_message(instance, excerpts)], ANSWER_SCHEMA)

    def extract(self, instance: Instance, text: str) -> Answer:
        return extract(instance, text)
