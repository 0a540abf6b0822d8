"""Ranking metrics over ranked id lists: Hit@k and reciprocal rank (APeB's ranking judge).

Values are fractions in 0..1; callers that report on 0..100 scale them.
A ranking that repeats an id counts only its first occurrence.
"""
from __future__ import annotations

from collections.abc import Sequence


def rank_of(ranking: Sequence[str], gold: str) -> int | None:
    """1-based position of `gold` in `ranking`, or None when it is absent."""
    for i, item in enumerate(ranking, start=1):
        if item == gold:
            return i
    return None


def hit_at_k(ranking: Sequence[str], gold: str, k: int) -> float:
    """1.0 when `gold` is among the first `k` items, else 0.0."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    r = rank_of(ranking, gold)
    return float(r is not None and r <= k)


def reciprocal_rank(ranking: Sequence[str], gold: str) -> float:
    """1 / rank of `gold`, 0.0 when it is absent (MRR over the list given, e.g. MRR@5 for a top-5 list)."""
    r = rank_of(ranking, gold)
    return 0.0 if r is None else 1.0 / r
