"""The paper's prompt construction (Salemi et al. 2024, Table 5 and the release's code), per task, from the
templates of the card (perseval.benchmarks.lamp.card).

Each profile item becomes one short text in the task's pattern (its document text, so the retriever and the
prompt see the same item); the k items chosen for a question are joined with ", and " and put before the
question's input (LaMP-1: inside it, right after the word "title"), with the task's bridge words. The
retrieval query is the part of the input the paper retrieves with: the two candidate titles of LaMP-1, the
text after "description:", "review:", "article:", "paper:", or after the first colon (LaMP-6, LaMP-7).
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from perseval.benchmarks.lamp.card import (ITEM_SEPARATOR, ITEM_TEMPLATES, NO_PROFILE_TEMPLATE, PROMPT_TEMPLATE,
                                         PROMPT_TEMPLATES)

Item = Mapping[str, Any]
_QUOTED = re.compile(r'"([^"]*)"')


def item_text(task: str, item: Item) -> str:
    """One profile item in its task's template (the card's ITEM_TEMPLATES)."""
    return ITEM_TEMPLATES[task].format(**item)


def retrieval_query(task: str, text: str, marker: str) -> str:
    """The part of the input the paper retrieves with (the whole input when the marker is absent)."""
    if task == "LaMP-1":
        quoted = _QUOTED.findall(text)
        return " ".join(quoted[1:3]) if len(quoted) >= 3 else text
    at = text.find(marker)
    return text[at + len(marker):].strip() if at >= 0 else text


def with_profile(task: str, text: str, items: Sequence[str]) -> str:
    """The question's input with the chosen profile items (already in the task's pattern); none: the input."""
    if not items:
        return NO_PROFILE_TEMPLATE.format(input=text)
    joined = ITEM_SEPARATOR.join(items)
    if task == "LaMP-1":
        at = text.find("title") + len("title")
        return text if at < len("title") else PROMPT_TEMPLATES[task].format(head=text[:at], items=joined, tail=text[at:])
    return PROMPT_TEMPLATES.get(task, PROMPT_TEMPLATE).format(items=joined, input=text)
