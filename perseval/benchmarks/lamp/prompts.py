"""The paper's prompt construction (Salemi et al. 2024, Table 5 and the release's code), per task.

Each profile item becomes one short text in the task's pattern (its document text, so the retriever and the
prompt see the same item); the k items chosen for a question are joined with ", and " and put before the
question's input (LaMP-1: inside it, right after the word "title"), with the task's bridge words. The
retrieval query is the part of the input the paper retrieves with: the two candidate titles of LaMP-1, the
text after "description:", "review:", "article:", "paper:", or after the first colon (LaMP-6, LaMP-7).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

Item = Mapping[str, Any]
_QUOTED = re.compile(r'"([^"]*)"')

ITEM_PATTERNS: dict[str, Callable[[Item], str]] = {
    "LaMP-1": lambda p: f'"{p["title"]}"',
    "LaMP-2": lambda p: f'the tag for the movie: "{p["description"]}" is "{p["tag"]}"',
    "LaMP-3": lambda p: f'{p["score"]} is the score for "{p["text"]}"',
    "LaMP-4": lambda p: f'"{p["title"]}" is the title for "{p["text"]}"',
    "LaMP-5": lambda p: f'"{p["title"]}" is a title for "{p["abstract"]}"',
    "LaMP-6": lambda p: f'"{p["title"]}" is the title for "{p["text"]}"',
    "LaMP-7": lambda p: f'"{p["text"]}"',
}
# What joins the items to the input (LaMP-1 is inserted into the input instead).
BRIDGES = {"LaMP-5": ". Following the given patterns ", "LaMP-7": " are written by a person. Following the given "
           "patterns "}
DEFAULT_BRIDGE = ". "


def item_text(task: str, item: Item) -> str:
    return ITEM_PATTERNS[task](item)


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
        return text
    joined = ", and ".join(items)
    if task == "LaMP-1":
        at = text.find("title")
        return text if at < 0 else f"{text[:at + 5]}, and {joined}{text[at + 5:]}"
    return f"{joined}{BRIDGES.get(task, DEFAULT_BRIDGE)}{text}"
