"""The sign-flip test of a paired difference over users, and the interval that inverts it.

H0(delta): each user's differences are symmetric around delta. The statistic is the sum over users of
x_g = D_g - delta n_g (D_g: the user's summed differences, n_g: its instances); a sign pattern s counts
as at least as extreme as the observed one when |sum s_g x_g| >= |sum x_g|. Splitting the users into the
kept (+) and flipped (-) groups with sums S+ and S-, that is |S+ - S-| >= |S+ + S-|, i.e. S+ S- <= 0: the
pattern counts exactly when delta lies between the two groups' instance-weighted mean differences. So
each pattern accepts an interval of delta that contains the point estimate, p(delta) falls monotonically
away from it, and the level-alpha interval {delta : p(delta) >= alpha} is read off order statistics of
the patterns' endpoints. The interval excludes 0 exactly when p(0) < alpha: both come from the same
numbers (tests/test_uncertainty.py checks it, and p against scipy.stats.permutation_test).

With up to EXACT_MAX_USERS users every pattern is enumerated (exact); above, `resamples` random patterns
plus the observed one. With 5 users or fewer the smallest attainable p is 2 / 2^G >= 1/16 > 0.05: no
difference can be significant and the interval is the whole scale.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import numpy as np

EXACT_MAX_USERS = 12  # 2^12 = 4096 patterns


@dataclass(frozen=True)
class FlipInterval:
    p_value: float
    low: float   # -inf / inf where no pattern bounds it (too few users)
    high: float


@lru_cache(maxsize=EXACT_MAX_USERS)
def _all_patterns(n_users: int) -> np.ndarray:
    out = np.array(list(itertools.product((1, 0), repeat=n_users)), dtype=float)
    out.setflags(write=False)
    return out


BLOCK_BYTES = 32 * 2**20  # patterns are drawn and bounded this many bytes at a time: 2,001 x 20,000 users in
# one matrix was 320 MB, and its draw and complement as many again (the same draws either way: a generator's
# integers drawn block by block are the ones it draws at once)


def patterns(n_users: int, resamples: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Sign patterns as rows of 0/1 (1: kept), in blocks of rows: all of them, or the observed one and
    `resamples` random ones."""
    if n_users <= EXACT_MAX_USERS:
        yield _all_patterns(n_users)
        return
    yield np.ones((1, n_users))
    rows = max(1, BLOCK_BYTES // (8 * n_users))
    for start in range(0, resamples, rows):
        yield rng.integers(0, 2, size=(min(rows, resamples - start), n_users)).astype(float)


def _bounds(sums: np.ndarray, counts: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pattern, the interval of delta it accepts: between the kept and the flipped group's means."""
    p_n, m_n = keep @ counts, (1 - keep) @ counts
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_p, mean_m = (keep @ sums) / p_n, ((1 - keep) @ sums) / m_n
    one_group = (p_n == 0) | (m_n == 0)  # the observed pattern or its mirror: accepts every delta
    low = np.where(one_group, -math.inf, np.minimum(mean_p, mean_m))
    high = np.where(one_group, math.inf, np.maximum(mean_p, mean_m))
    return low, high


def sign_flip(sums: np.ndarray, counts: np.ndarray, *, alpha: float, resamples: int,
              rng: np.random.Generator) -> FlipInterval:
    """Two-sided p of H0(0) and the 1 - alpha interval from the users' summed differences and counts."""
    ends = [_bounds(sums, counts, keep) for keep in patterns(len(sums), resamples, rng)]
    low, high = np.concatenate([lo for lo, _ in ends]), np.concatenate([hi for _, hi in ends])
    total = len(low)
    need = math.ceil(alpha * total - 1e-9)  # p(delta) = accepted / total >= alpha
    upper = float(-np.partition(-high, need - 1)[need - 1])  # the need-th largest upper end
    lower = float(np.partition(low, need - 1)[need - 1])
    estimate = float(sums.sum() / counts.sum())
    # p(0) read from the same ends the interval uses: on 0's side of the estimate only one end matters
    accepted = np.sum(high >= 0) if estimate <= 0 else np.sum(low <= 0)
    return FlipInterval(float(accepted / total), lower, upper)
