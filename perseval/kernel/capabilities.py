"""What an agent can ask of its run, and the one place that says what each capability costs the run.

An agent declares its capabilities (`Agent.needs` / `Agent.requires()`); the plan, the run stage's context
builder and the freshness check all read what a capability needs from here: a served model, an opened
index, a search back end. A `str` enum, so an agent written with plain strings (`frozenset({"llm"})`)
still compares equal.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Any, Iterable


class Capability(StrEnum):
    LLM = "llm"  # the backbone model
    RETRIEVE = "retrieve"  # retrieval over the owner's indexed history (or the corpus)
    DOCUMENTS = "documents"  # the owner's raw history, in time order
    SEARCH = "search"  # a search back end (corpus index, gold information, web)
    REQUEST_FORMAT = "request_format"  # the benchmark's request format (prompt and answer extraction)


CORPUS_SEARCH = "corpus"  # the search back end that searches the benchmark's own index


def capabilities(values: Iterable[str], where: str) -> frozenset[Capability]:
    """`values` as capabilities; a ValueError naming `where` and the allowed values for an unknown one."""
    out = set()
    for v in values:
        try:
            out.add(Capability(v))
        except ValueError:
            raise ValueError(f"{where}: unknown capability {v!r} (known: {[c.value for c in Capability]})") from None
    return frozenset(out)


def needs_model(needs: frozenset[Capability]) -> bool:
    """A run needs its backbone served (and one run per backbone)."""
    return Capability.LLM in needs


def needs_index(needs: frozenset[Capability], search: str | dict[str, Any] | None) -> bool:
    """A run needs the retriever's index built and opened (and one run per retriever)."""
    return Capability.RETRIEVE in needs or (Capability.SEARCH in needs and search == CORPUS_SEARCH)

