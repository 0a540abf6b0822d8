"""Means with user-clustered uncertainty, paired comparisons, multiple-comparison correction and power.

The unit of independence is the user (DESIGN.md section 6): a user contributes several instances, so
instances are correlated and a per-instance standard error is too small. Everything here resamples or
sums over users (Miller, "Adding Error Bars to Evals", 2024):

- the point estimate is the plain mean over the kept instances (the mean the score tables show);
- the interval is a cluster bootstrap: users drawn with replacement, all of a drawn user's instances
  kept, the mean recomputed (deterministic for a seed), read off as BCa percentiles (the jackknife also
  over users; scipy.stats.bootstrap's default method);
- the standard error is the analytic cluster-robust one (CR1, the small-sample correction G / (G - 1)
  that statsmodels applies to OLS on a constant with `cov_type="cluster"`);
- two cells on the same instances are compared paired: per-instance differences, a user-clustered
  bootstrap interval, a p-value from sign-flip permutation over users (exact when there are few users);
- the minimum detectable difference (80% power, alpha 0.05) uses t quantiles with G - 1 degrees of
  freedom, so a handful of users reads as "only very large differences are detectable".

Values are floats; NaN or None means unscored: dropped, and n counts only what is kept.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

ALPHA = 0.05
POWER = 0.80
METHOD = "cluster-bootstrap BCa"
EXACT_FLIPS_MAX_USERS = 12  # up to 2**12 = 4096 sign patterns: enumerate them all (an exact p-value)


@dataclass(frozen=True)
class Estimate:
    """A mean with its user-clustered uncertainty (None where it cannot be computed, e.g. one user)."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    n: int
    n_users: int
    level: float
    method: str

    @property
    def half_width(self) -> float | None:
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Difference:
    """a - b, with its interval, p-value and the smallest difference this n could detect."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    p_value: float | None
    n: int
    n_users: int
    paired: bool
    mde: float | None  # minimum detectable difference at 80% power, alpha 0.05, for this n
    level: float
    method: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- users as clusters ----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Clusters:
    """Per-user sums and counts of the kept values (users sorted, so instance order never matters)."""

    sums: np.ndarray
    counts: np.ndarray

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def n_users(self) -> int:
        return len(self.counts)

    @property
    def mean(self) -> float:
        return float(self.sums.sum() / self.counts.sum())


def _kept(values: Sequence[float | None], clusters: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(pd.to_numeric(pd.Series(list(values), dtype=object), errors="raise"), dtype=float)
    c = np.asarray(list(clusters), dtype=object)
    if len(x) != len(c):
        raise ValueError(f"{len(x)} values but {len(c)} cluster labels: one user id per value is needed")
    keep = ~np.isnan(x)
    return x[keep], c[keep]


def _by_user(x: np.ndarray, c: np.ndarray) -> _Clusters:
    codes, _ = pd.factorize(pd.Series(c, dtype=object).astype(str), sort=True)
    return _Clusters(np.bincount(codes, weights=x), np.bincount(codes).astype(float))


def cluster_se(values: Sequence[float | None], clusters: Sequence[Hashable]) -> float | None:
    """Cluster-robust standard error of the mean (CR1): sqrt(G/(G-1) * sum_g (sum_i (x_gi - mean))^2) / n.

    This is statsmodels' OLS-on-a-constant `cov_type="cluster"` with its default small-sample correction
    (G/(G-1) * (n-1)/(n-k), and k = 1). None with fewer than two users."""
    g = _by_user(*_kept(values, clusters))
    return _se(g)


def _se(g: _Clusters) -> float | None:
    if g.n_users < 2:
        return None
    resid = g.sums - g.counts * g.mean  # each user's summed residual
    return float(math.sqrt(g.n_users / (g.n_users - 1) * float(np.sum(resid ** 2))) / g.n)


def _boot_means(g: _Clusters, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `resamples` cluster-bootstrap samples: users drawn with replacement, all their instances."""
    idx = rng.integers(0, g.n_users, size=(resamples, g.n_users))
    return g.sums[idx].sum(axis=1) / g.counts[idx].sum(axis=1)


def _percentile(draws: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def _bca(g: _Clusters, draws: np.ndarray, level: float) -> tuple[float, float]:
    """Bias-corrected and accelerated percentiles (Efron 1987), the jackknife leaving out one user at a time.

    Why not plain percentiles: a mean of 0/100 scores over few users is skewed, and the percentile interval
    then covers less than its level (93.5% instead of 95% on 50 users in scripts/coverage_check.py)."""
    b = len(draws)
    share = float(np.mean(draws < g.mean) + 0.5 * np.mean(draws == g.mean))
    z0 = stats.norm.ppf(min(max(share, 1 / (2 * b)), 1 - 1 / (2 * b)))
    jack = (g.sums.sum() - g.sums) / (g.counts.sum() - g.counts)  # the mean without user i
    d = jack.mean() - jack
    ss = float(np.sum(d ** 2))
    accel = float(np.sum(d ** 3)) / (6 * ss ** 1.5) if ss > 0 else 0.0
    z = stats.norm.ppf([(1 - level) / 2, 1 - (1 - level) / 2])
    probs = stats.norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z)))
    low, high = np.percentile(draws, 100 * probs)
    return float(low), float(high)


def _check(level: float, resamples: int) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")


def _estimate(g: _Clusters, level: float, resamples: int, seed: int) -> Estimate:
    if g.n == 0:
        return Estimate(None, None, None, None, 0, 0, level, METHOD)
    if g.n_users < 2:  # one user: no between-user variation to resample
        return Estimate(g.mean, None, None, None, g.n, g.n_users, level, METHOD)
    low, high = _bca(g, _boot_means(g, resamples, np.random.default_rng(seed)), level)
    return Estimate(g.mean, low, high, _se(g), g.n, g.n_users, level, METHOD)


def cluster_mean(values: Sequence[float | None], clusters: Sequence[Hashable], *, level: float = 0.95,
                 resamples: int = 2000, seed: int = 0) -> Estimate:
    """The mean of `values` with a BCa cluster-bootstrap interval over users (`clusters[i]`: the user
    of value i) and the analytic cluster-robust SE. Unscored (NaN/None) values are dropped."""
    _check(level, resamples)
    return _estimate(_by_user(*_kept(values, clusters)), level, resamples, seed)


def naive_mean(values: Sequence[float | None], *, level: float = 0.95) -> Estimate:
    """The per-instance interval (mean +- t * sd / sqrt(n)), as if every instance were independent: what
    a harness without clustering reports. Kept for comparison (scripts/coverage_check.py)."""
    x = np.asarray(pd.to_numeric(pd.Series(list(values), dtype=object)), dtype=float)
    x = x[~np.isnan(x)]
    if len(x) < 2:
        return Estimate(float(x.mean()) if len(x) else None, None, None, None, len(x), len(x), level, "naive-t")
    se = float(x.std(ddof=1) / math.sqrt(len(x)))
    t = float(stats.t.ppf(1 - (1 - level) / 2, len(x) - 1))
    m = float(x.mean())
    return Estimate(m, m - t * se, m + t * se, se, len(x), len(x), level, "naive-t")


# ---- power -------------------------------------------------------------------------------------

def _power_factor(n_users: int, alpha: float, power: float) -> float:
    df = n_users - 1
    return float(stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df))


def mde(se: float | None, n_users: int, *, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """Minimum detectable difference: (t_{1-alpha/2} + t_power) * SE, with G - 1 degrees of freedom."""
    if se is None or n_users < 2:
        return None
    return _power_factor(n_users, alpha, power) * se


def users_needed(se: float, n_users: int, delta: float, *, alpha: float = ALPHA, power: float = POWER,
                 max_users: int = 10_000_000) -> int:
    """Users needed to detect a difference `delta` from a pilot with paired SE `se` on `n_users` users.

    The SE of a mean over users shrinks as 1 / sqrt(G): at G users it is se * sqrt(n_users / G). Returns
    the smallest G >= 2 with mde(G) <= |delta|."""
    if n_users < 2 or se < 0:
        raise ValueError(f"a pilot needs >= 2 users and a non-negative SE, got n_users={n_users}, se={se}")
    if delta == 0:
        raise ValueError("a difference of 0 cannot be detected: name the smallest difference that matters")
    if se == 0:
        return 2
    target = abs(delta)
    unit = se * math.sqrt(n_users)  # the SE at one user

    def detectable(g: int) -> bool:
        return _power_factor(g, alpha, power) * unit / math.sqrt(g) <= target

    low = 2
    if detectable(low):
        return low
    high = max(4, math.ceil((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) ** 2 * (unit / target) ** 2))
    while not detectable(high):
        high *= 2
        if high > max_users:
            raise ValueError(f"more than {max_users} users would be needed to detect {delta}")
    while high - low > 1:  # detectable is monotone in g: bisect
        mid = (low + high) // 2
        low, high = (low, mid) if detectable(mid) else (mid, high)
    return high


# ---- comparisons -------------------------------------------------------------------------------

def _sign_flip_p(g: _Clusters, resamples: int, rng: np.random.Generator) -> float:
    """Two-sided p of H0 "each user's differences are symmetric around 0": flip the sign of whole users.

    With up to EXACT_FLIPS_MAX_USERS users every sign pattern is enumerated (exact p, the smallest
    possible being 2 / 2**G); above, `resamples` random patterns with the observed one counted in."""
    observed = abs(g.sums.sum())
    tol = 1e-9 * max(1.0, float(np.abs(g.sums).sum()))  # ties with the observed statistic count as extreme
    if g.n_users <= EXACT_FLIPS_MAX_USERS:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=g.n_users)))
        return float(np.mean(np.abs(signs @ g.sums) >= observed - tol))
    signs = rng.choice((1.0, -1.0), size=(resamples, g.n_users))
    return float((1 + np.sum(np.abs(signs @ g.sums) >= observed - tol)) / (resamples + 1))


def paired_difference(a: Sequence[float | None], b: Sequence[float | None], clusters: Sequence[Hashable], *,
                      level: float = 0.95, resamples: int = 2000, seed: int = 0) -> Difference:
    """a - b over the instances scored in both cells (`a[i]`, `b[i]`: instance i; `clusters[i]`: its user).

    Interval: cluster bootstrap of the mean per-instance difference; SE: cluster-robust; p: sign-flip
    permutation over users; mde: the detectable difference at this number of users."""
    _check(level, resamples)
    if not (len(a) == len(b) == len(clusters)):
        raise ValueError(f"paired cells need one value each per instance: {len(a)}, {len(b)}, {len(clusters)} given")
    xa = np.asarray(pd.to_numeric(pd.Series(list(a), dtype=object)), dtype=float)
    xb = np.asarray(pd.to_numeric(pd.Series(list(b), dtype=object)), dtype=float)
    g = _by_user(*_kept(xa - xb, clusters))  # NaN in either cell: not a pair, dropped
    est = _estimate(g, level, resamples, seed)
    p = _sign_flip_p(g, resamples, np.random.default_rng(seed + 1)) if g.n_users >= 1 else None
    return Difference(est.mean, est.ci_low, est.ci_high, est.se, p, g.n, g.n_users, True, mde(est.se, g.n_users),
                      level, "paired cluster-bootstrap BCa, sign-flip p")


def unpaired_difference(a: Sequence[float | None], clusters_a: Sequence[Hashable], b: Sequence[float | None],
                        clusters_b: Sequence[Hashable], *, level: float = 0.95, resamples: int = 2000,
                        seed: int = 0) -> Difference:
    """a - b for cells on different instances: never paired. Each cell's users are resampled on their own
    (a stratified cluster bootstrap); SE = sqrt(se_a^2 + se_b^2); p from t on that SE with
    min(G_a, G_b) - 1 degrees of freedom. n and n_users count both cells (users once each)."""
    _check(level, resamples)
    ka, kb = _kept(a, clusters_a), _kept(b, clusters_b)
    ga, gb = _by_user(*ka), _by_user(*kb)
    n, n_users = ga.n + gb.n, len(set(map(str, ka[1])) | set(map(str, kb[1])))
    method = "unpaired cluster-bootstrap percentile, t p"
    if ga.n == 0 or gb.n == 0:
        return Difference(None, None, None, None, None, n, n_users, False, None, level, method)
    diff = ga.mean - gb.mean
    if ga.n_users < 2 or gb.n_users < 2:
        return Difference(diff, None, None, None, None, n, n_users, False, None, level, method)
    rng = np.random.default_rng(seed)
    low, high = _percentile(_boot_means(ga, resamples, rng) - _boot_means(gb, resamples, rng), level)
    se = math.sqrt(_se(ga) ** 2 + _se(gb) ** 2)  # type: ignore[operator]
    df = min(ga.n_users, gb.n_users) - 1
    p = 1.0 if se == 0 and diff == 0 else 0.0 if se == 0 else float(2 * stats.t.sf(abs(diff) / se, df))
    return Difference(diff, low, high, se, p, n, n_users, False, mde(se, df + 1), level, method)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of the p-values one table shows; None (no test) stays None and does not
    count as a comparison."""
    present = [(i, p) for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    out: list[float | None] = [None] * len(p_values)
    m, running = len(present), 0.0
    for rank, (i, p) in enumerate(sorted(present, key=lambda t: t[1])):
        running = max(running, min(1.0, (m - rank) * p))  # adjusted p never decreases along the order
        out[i] = running
    return out
