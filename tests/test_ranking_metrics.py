"""Ranking metrics against values computed by hand."""
import pytest

from perseval.metrics.ranking import hit_at_k, rank_of, reciprocal_rank

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
