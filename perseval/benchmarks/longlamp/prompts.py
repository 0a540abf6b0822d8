"""The paper's prompt construction (Kumar et al. 2024, as LaMP's), per task, from the card's templates
(perseval.benchmarks.longlamp.card).

Each profile item becomes one text in its task's template (its document text, so the retriever and the
prompt see the same item); the k items chosen for a row are joined with ", and " and put before the row's
input with the task's bridge words. The retrieval query is the whole input (its title and keywords, the
product and the rating, or the post's summary, with the task's instruction words).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from perseval.benchmarks.longlamp.card import ITEM_SEPARATOR, ITEM_TEMPLATES, NO_PROFILE_TEMPLATE, PROMPT_TEMPLATES


def item_text(task: str, item: Mapping[str, Any]) -> str:
    """One profile item in its task's template (the card's ITEM_TEMPLATES); the fields as the release gives
    them, stripped."""
    return ITEM_TEMPLATES[task].format(**{k: str(v).strip() for k, v in item.items()})


def with_profile(task: str, text: str, items: Sequence[str]) -> str:
    """The row's input with the chosen profile items (already in the task's template); none: the input."""
    if not items:
        return NO_PROFILE_TEMPLATE.format(input=text)
    return PROMPT_TEMPLATES[task].format(items=ITEM_SEPARATOR.join(items), input=text)
