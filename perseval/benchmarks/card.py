"""A benchmark's card: the one module a reader opens to see what a benchmark reads, sends and scores.

Every benchmark folder holds `card.py` with one `CARD = BenchmarkCard(...)` and, as module constants, the
prompt templates its prompt-building code imports (the text the model really receives, placeholders in
`{braces}`). Each entry names where its detail lives as "module:attribute" (relative to perseval), so the
card stays short and a pointer that goes stale fails tests/test_cards.py. The protocol sheet
(docs/protocols/<name>.md) is the card's second half: how each setting differs from the paper.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

Pointers = Mapping[str, str]  # what -> "module:attribute", module relative to `perseval.`


@dataclass(frozen=True)
class BenchmarkCard:
    name: str  # the registered benchmark name
    paper: str  # the citation the numbers are compared with
    data: Mapping[str, str]  # each file read -> the fields taken from it
    prompts: Mapping[str, str]  # each template's name -> its text (the card's module constants)
    answer: str  # how an answer is read, in one sentence
    judges: Pointers  # registered judge name -> where it is defined
    metrics: Mapping[str, str]  # metric -> what it measures
    controls: Mapping[str, str] = field(default_factory=dict)  # control -> what it asks
    analyses: Pointers = field(default_factory=dict)  # table or analysis -> where it is computed
    agents: Pointers = field(default_factory=dict)  # the benchmark's own agents (the generic ones also run)
    code: Pointers = field(default_factory=dict)  # the steps behind the card: loader, prompt, extraction...
    protocol: str = ""  # the protocol sheet, relative to the repository root

    def pointers(self) -> dict[str, str]:
        """Every "module:attribute" the card names."""
        return {**self.judges, **self.analyses, **self.agents, **self.code}
