"""The records that flow between stages, one dataclass per table row.

Benchmark-specific fields travel in `payload` (visible to agents) and `gold`
(hidden ground truth, seen only by scorers and oracle agents); both are stored
as JSON text in Parquet so every benchmark shares one schema per stage.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal

from perseval.core.frozen import freeze

CORPUS_OWNER = "__corpus__"  # owner id of documents that belong to a search corpus, not a user
_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)


def instant(timestamp: str) -> datetime:
    """An ISO 8601 timestamp as the instant it names, for ordering histories: 10:00+09:00 comes before
    05:00Z, which text order gets wrong. A timestamp without a zone is taken as UTC; an empty or
    unreadable one sorts first."""
    try:
        t = datetime.fromisoformat(timestamp)
    except (TypeError, ValueError):
        return _EARLIEST
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Instance:
    """One task instance: a user, a query, what the agent may see, and the hidden gold."""

    instance_id: str
    benchmark: str
    user_id: str
    group: str  # the reporting group: IBA domain, Bespoke task type, APeB category
    query: str
    payload: dict[str, Any] = field(default_factory=dict)
    gold: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # read-only from the moment it exists: a benchmark builds a new instance to change one (with_gold)
        object.__setattr__(self, "payload", freeze(self.payload))
        object.__setattr__(self, "gold", freeze(self.gold))

    def public(self) -> "Instance":
        """The instance as a non-oracle agent sees it: no gold."""
        return Instance(self.instance_id, self.benchmark, self.user_id, self.group, self.query, self.payload, {})

    def with_gold(self, **fields: Any) -> "Instance":
        """A copy whose gold has `fields` added or replaced (a construction step that labels instances)."""
        return replace(self, gold={**self.gold, **fields})


@dataclass
class Document:
    """One history item (a chat turn, a session, a behaviour event) or corpus passage."""

    owner: str
    doc_id: str
    text: str
    timestamp: str = ""
    meta: dict[str, Any] = field(default_factory=dict)  # ground-truth tags, e.g. evidence dimension/value


@dataclass
class Passage:
    """A retrieved chunk of a document, with its similarity score."""

    doc_id: str
    chunk_id: int
    text: str
    score: float


OutputStatus = Literal["ok", "invalid", "failed"]


@dataclass
class AgentOutput:
    """What an agent produced for one instance and repeat."""

    instance_id: str
    agent: str
    repeat: int
    text: str
    parsed: dict[str, Any] | None = None  # the structured action (API slots, ranked ids) when there is one
    status: OutputStatus = "ok"  # invalid: unusable output kept as is; failed: the request failed
    error: str = ""
    trace: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: list[str] = field(default_factory=list)  # its LLM requests' cache keys, in order (their messages)


JudgmentStatus = Literal["scored", "unscored", "failed"]


@dataclass
class Judgment:
    """One atomic judgment: a checkpoint, a slot, a claim, a criterion or a rank."""

    instance_id: str
    agent: str
    repeat: int
    judge: str  # judge name, or "rule" for rule scorers
    judge_repeat: int
    item_id: str
    kind: str
    score: float | None  # None unless status == "scored"
    status: JudgmentStatus = "scored"
    raw: str = ""
    feedback: str = ""
    # an LLM judge's request as the trace shows it (llm.usage.prompt_record: messages, each clipped), so the
    # judge span shows what the judge was really asked; None for rules and for no request sent
    prompt: dict[str, Any] | None = None
    # a binary verdict read from token probabilities: P(true) (the score is P(true) >= the judge's threshold)
    # and how the verdict was read (`logprobs`, or `text` where the server returned no probabilities)
    p_true: float | None = None
    method: str = ""


@dataclass
class InstanceScore:
    """An instance-level metric value (None when no item of it could be scored)."""

    instance_id: str
    agent: str
    repeat: int
    judge: str
    judge_repeat: int
    group: str
    metric: str
    value: float | None
    n_items: int = 0
    n_unscored: int = 0
    user_id: str = ""  # the instance's user, the cluster of every interval (set by the score stage)
