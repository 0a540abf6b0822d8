"""Answer extraction for APeB: a ranked list of candidate ids out of free model text.

Kept apart from the metric: this turns text into ids and records every
repair it made; Hit@k and MRR are computed elsewhere from the result.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perseval.parsing import extract_json


@dataclass
class RankingAnswer:
    ranking: list[str]  # valid, distinct candidate ids, at most k
    found: bool  # a list of ids could be read at all
    dropped_unknown: list[str] = field(default_factory=list)
    dropped_duplicate: list[str] = field(default_factory=list)
    dropped_extra: list[str] = field(default_factory=list)

    @property
    def repaired(self) -> bool:
        return bool(self.dropped_unknown or self.dropped_duplicate or self.dropped_extra)

    def repairs(self) -> dict[str, list[str]]:
        return {"dropped_unknown": self.dropped_unknown, "dropped_duplicate": self.dropped_duplicate,
                "dropped_extra": self.dropped_extra}


def _items(text: str) -> list[Any] | None:
    value = extract_json(text)
    if isinstance(value, dict):
        value = value.get("ranking")
    return value if isinstance(value, list) else None


def _as_id(item: Any) -> str:
    # Small models sometimes answer [{"id": "p1"}, ...] or bare numbers: read those too.
    if isinstance(item, dict):
        item = item.get("id", "")
    return str(item).strip()


def parse_ranking(text: str, candidate_ids: list[str], k: int = 5) -> RankingAnswer:
    """Read up to `k` distinct candidate ids, dropping (and recording) unknown, repeated and extra ones."""
    items = _items(text)
    if items is None:
        return RankingAnswer([], found=False)
    allowed = set(candidate_ids)
    out = RankingAnswer([], found=True)
    for raw in items:
        pid = _as_id(raw)
        if pid not in allowed:
            out.dropped_unknown.append(pid)
        elif pid in out.ranking:
            out.dropped_duplicate.append(pid)
        elif len(out.ranking) >= k:
            out.dropped_extra.append(pid)
        else:
            out.ranking.append(pid)
    return out
