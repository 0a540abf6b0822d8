"""Typed rows of a loaded Bespoke release."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from perseval.benchmarks.bespoke.layout import CRITERIA, RESPONSE_TEXT_KEY


@dataclass
class CriterionRating:
    """A 1..5 rating of one criterion with the rater's feedback."""

    score: int
    feedback: str


@dataclass
class RatedResponse:
    """A response-judgment (R-J) pair: a response and its rating on every criterion."""

    contents: str
    ratings: dict[str, CriterionRating]

    def to_json(self) -> dict[str, Any]:
        """The release's JSON shape: {contents, <criterion>: {score, feedback}, ...}."""
        out: dict[str, Any] = {RESPONSE_TEXT_KEY: self.contents}
        for name in CRITERIA:
            out[name] = asdict(self.ratings[name])
        return out


@dataclass
class BespokeQuery:
    """One test query with everything the judges need."""

    user: str
    query_id: str
    query: str
    need: str
    claims: list[str]
    rubric: str
    shots: list[RatedResponse]
    meta_test: list[RatedResponse] = field(default_factory=list)
    task_type: str = ""  # analysis | guidance | recommendation | explanation, when known (not in the release)


@dataclass
class Session:
    """One chat or search session of a user's history, as raw text."""

    user: str
    session_id: str
    source: Literal["chat", "search"]
    text: str
    meta: dict[str, Any] = field(default_factory=dict)  # the parsed turns (sessions.session_meta)


@dataclass
class CorpusPassage:
    doc_id: str
    text: str


@dataclass
class BespokeRelease:
    """A whole release as read from disk."""

    queries: list[BespokeQuery]
    sessions: list[Session]
    corpus: list[CorpusPassage] = field(default_factory=list)
