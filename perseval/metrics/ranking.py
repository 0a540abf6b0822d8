"""Ranking metrics over ranked id lists: Hit@k, reciprocal rank, nDCG@k and their means.

Values are fractions in 0..1; callers that report on 0..100 scale them.
A ranking that repeats an id counts only its first occurrence.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


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


def ndcg_at_k(ranking: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Binary-relevance nDCG@k; 0.0 when nothing is relevant."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rel = set(relevant)
    seen: set[str] = set()
    dcg = 0.0
    for i, item in enumerate(ranking[:k], start=1):
        if item in rel and item not in seen:
            dcg += 1.0 / math.log2(i + 1)
        seen.add(item)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(k, len(rel)) + 1))
    return dcg / ideal if ideal else 0.0


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not None; None when there are none."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def mean_hit_at_k(rankings: Sequence[Sequence[str]], golds: Sequence[str], k: int) -> float | None:
    _same_length(rankings, golds)
    return mean(hit_at_k(r, g, k) for r, g in zip(rankings, golds))


def mean_reciprocal_rank(rankings: Sequence[Sequence[str]], golds: Sequence[str]) -> float | None:
    _same_length(rankings, golds)
    return mean(reciprocal_rank(r, g) for r, g in zip(rankings, golds))


def _same_length(rankings: Sequence, golds: Sequence) -> None:
    if len(rankings) != len(golds):
        raise ValueError(f"{len(rankings)} rankings but {len(golds)} gold items")
