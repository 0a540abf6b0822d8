"""Ranking metrics against values computed by hand."""
import math

import pytest

from perseval.metrics.ranking import (hit_at_k, mean, mean_hit_at_k, mean_reciprocal_rank, ndcg_at_k, rank_of,
                                      reciprocal_rank)

RANKING = ["a", "b", "c", "d", "e"]


def test_rank_of_is_one_based_and_none_when_absent():
    assert rank_of(RANKING, "a") == 1
    assert rank_of(RANKING, "e") == 5
    assert rank_of(RANKING, "z") is None
    assert rank_of(["a", "a", "b"], "a") == 1  # first occurrence counts


@pytest.mark.parametrize("gold,k,expected", [("a", 1, 1.0), ("c", 1, 0.0), ("c", 2, 0.0), ("c", 3, 1.0),
                                             ("e", 5, 1.0), ("z", 5, 0.0)])
def test_hit_at_k(gold, k, expected):
    assert hit_at_k(RANKING, gold, k) == expected


@pytest.mark.parametrize("gold,expected", [("a", 1.0), ("b", 0.5), ("c", 1 / 3), ("e", 0.2), ("z", 0.0)])
def test_reciprocal_rank(gold, expected):
    assert reciprocal_rank(RANKING, gold) == pytest.approx(expected)


def test_k_must_be_positive():
    with pytest.raises(ValueError):
        hit_at_k(RANKING, "a", 0)
    with pytest.raises(ValueError):
        ndcg_at_k(RANKING, {"a"}, 0)


def test_means_over_three_queries():
    rankings = [["a", "b"], ["b", "a"], ["c", "d"]]
    golds = ["a", "a", "a"]
    assert mean_hit_at_k(rankings, golds, 1) == pytest.approx(1 / 3)
    assert mean_hit_at_k(rankings, golds, 2) == pytest.approx(2 / 3)
    assert mean_reciprocal_rank(rankings, golds) == pytest.approx((1 + 0.5 + 0) / 3)
    with pytest.raises(ValueError):
        mean_reciprocal_rank(rankings, golds[:2])


def test_mean_skips_none_and_is_none_when_empty():
    assert mean([None, 1.0, 0.0]) == 0.5
    assert mean([None]) is None
    assert mean([]) is None


def test_ndcg_binary_relevance():
    # Relevant items at ranks 2 and 4: DCG = 1/log2(3) + 1/log2(5); ideal = 1 + 1/log2(3).
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["x", "a", "y", "b"], {"a", "b"}, 4) == pytest.approx(expected)
    assert expected == pytest.approx(0.650921, abs=1e-6)
    assert ndcg_at_k(["a", "b"], {"a", "b"}, 2) == pytest.approx(1.0)
    assert ndcg_at_k(["a", "a"], {"a", "b"}, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))  # repeat ignored
    assert ndcg_at_k(["x", "y", "a"], {"a"}, 2) == 0.0  # beyond the cut-off
    assert ndcg_at_k(["a"], set(), 3) == 0.0
