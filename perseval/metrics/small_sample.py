"""Small-sample pieces of a user-clustered mean: the CR2 variance, its Bell-McCaffrey degrees of freedom,
Kish's effective number of users, and the Korn-Graubard interval for a mean on a bounded scale.

Why these and not a bootstrap: with 6-12 users a cluster bootstrap has few distinct resamples and its
intervals cover 90-91% instead of 95%; with every value at 100 every resample is 100 and the interval is
[100, 100]. The pieces here are analytic and hold from 6 users up (scripts/coverage_check.py):

- CR2 (Bell & McCaffrey 2002) scales each user's summed residual by (1 - h_g)^(-1/2), h_g = n_g / n the
  user's leverage on a mean, so a large user does not hide its own residual; with equal users it is CR1.
- Its Satterthwaite degrees of freedom (Bell-McCaffrey, as in R's clubSandwich and Imbens & Kolesar 2016)
  are G - 1 for equal users and fewer when a few users hold most instances.
- Korn & Graubard (1998): an interval for a proportion on the effective sample size n* = p(1-p) / Var(p),
  with n* scaled by (z / t_df)^2 for the few users the variance rests on (NCHS uses it for survey
  proportions); here the proportion's interval is Jeffreys' (a Bayesian beta interval). It is asymmetric
  near 0 and 100, where a mean +- t x SE leaves the scale or covers one side only.
- For graded scores, the side of the interval towards the users' long tail is lengthened by the
  first-order Edgeworth (Cornish-Fisher) term of the studentized mean, SE x |skewness of the mean| x
  (2 z^2 + 1) / 6 (Johnson 1978, "Modified t tests and confidence intervals for asymmetrical
  populations", JASA 73: 536-544; Hall 1992, "The Bootstrap and Edgeworth Expansion", section 2.6), the
  skewness estimated from the users' summed residuals (cluster_skewness). Why: near the ceiling the
  users' means are strongly left-skewed (rare low users); a sample that happens to hold few of them has
  a mean too high and a variance too small at once, so a t-type interval misses below far more often
  than above (50 users, mean 95, intra-user correlation 0.5, 4000 experiments: 4.8% below and 1.7%
  above, 93.6% coverage; with the term 95.8%, half-width 2.95 -> 3.36 points). The Jeffreys interval's
  own asymmetry is a binomial's on n* and too small for such users (only the skew beyond it: 93.8%).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats


def cr2_variance(sums: np.ndarray, counts: np.ndarray) -> float:
    """CR2 variance of the mean of n = sum(counts) values, from each user's sum and count of values."""
    n = counts.sum()
    resid = sums - counts * (sums.sum() / n)
    return float(np.sum(resid ** 2 / (1 - counts / n)) / n ** 2)


def bm_df(counts: np.ndarray) -> float:
    """Bell-McCaffrey degrees of freedom of the CR2 variance of a mean: (tr M)^2 / tr(M^2), M = G'G under
    the working model of independent, equal-variance values (Imbens & Kolesar 2016, section 3)."""
    n = counts.sum()
    a2 = 1 / (1 - counts / n) / n ** 2  # a_g^2, a_g = (1 - h_g)^(-1/2) / n
    # M_gh = a_g a_h (n_g [g = h] - n_g n_h / n), summed in closed form: O(G), where forming M took G x G
    # floats (800 MB at 10,000 users, several times over)
    diagonal = a2 * (counts - counts ** 2 / n)
    off = a2 * counts ** 2 / n  # M_gh^2 = off_g off_h for g != h
    return float(diagonal.sum() ** 2 / (np.sum(diagonal ** 2) + off.sum() ** 2 - np.sum(off ** 2)))


def kish_users(counts: np.ndarray) -> float:
    """Kish's effective number of users, n^2 / sum n_g^2: G when every user has as many instances."""
    return float(counts.sum() ** 2 / np.sum(counts ** 2))


def beta_interval(p: float, n_eff: float, level: float, exact: bool = False) -> tuple[float, float]:
    """Jeffreys interval of a proportion p from n_eff trials (n_eff need not be whole): the quantiles of
    Beta(x + 1/2, n_eff - x + 1/2), x = p n_eff, with 0 below where x is 0 and 1 above where x is n_eff
    (Brown, Cai & DasGupta 2001). `exact`: Clopper-Pearson's Beta(x, n - x + 1) and Beta(x + 1, n - x)
    instead, for counts (0/100 scores), whose discreteness it guards against; graded scores are not
    counts, and that guard would only widen their intervals."""
    x, tail = p * n_eff, (1 - level) / 2
    a_low, b_low, a_high, b_high = (x, n_eff - x + 1, x + 1, n_eff - x) if exact else (x + 0.5, n_eff - x + 0.5) * 2
    low = 0.0 if x <= 0 else float(stats.beta.ppf(tail, a_low, b_low))
    high = 1.0 if x >= n_eff else float(stats.beta.ppf(1 - tail, a_high, b_high))
    return low, high


def cluster_skewness(sums: np.ndarray, counts: np.ndarray) -> float:
    """The skewness of a mean over users, estimated from each user's summed residual r_g:
    sum r_g^3 / (sum r_g^2)^(3/2), which is gamma / sqrt(G) for G equal users whose totals have skewness
    gamma (the n^(-1/2) gamma of the Edgeworth expansion). 0 where the users show no variation."""
    resid = sums - counts * (sums.sum() / counts.sum())
    s2 = float(np.sum(resid ** 2))
    return float(np.sum(resid ** 3) / s2 ** 1.5) if s2 > 0 else 0.0


def korn_graubard(p: float, variance: float, df: float, floor_n: float, level: float,
                  counts: bool = False, skewness: float = 0.0) -> tuple[tuple[float, float], float]:
    """(interval, n*) of a proportion p in [0, 1] whose variance estimate rests on `df` degrees of freedom.

    n* = p(1-p) / variance, then scaled by (z / t_df)^2. Where the data show no variation (variance
    0 or p at 0 or 1) there is nothing to estimate n* from: it is `floor_n`, the caller's worst case (the
    effective number of users: as if each user's values were one draw, intra-user correlation 1), unscaled.
    `counts`: the values are 0/1, and the interval is Clopper-Pearson's (Korn & Graubard's own choice).
    `skewness`: the estimated skewness of the mean (cluster_skewness); the side towards its tail is
    lengthened by the Edgeworth term sqrt(variance) x |skewness| x (2 z^2 + 1) / 6 (Johnson 1978; Hall
    1992), where a studentized mean of skewed users puts more than (1 - level) / 2 of its mass. Only that
    side: the term would shorten the other one, and a skewness estimated from few users is too noisy to
    narrow an interval on."""
    if not (variance > 0 and 0 < p < 1):  # a worst case, not an estimate: no df to shrink it for
        return beta_interval(p, floor_n, level, counts), floor_n
    z = stats.norm.ppf(1 - (1 - level) / 2)
    n_eff = p * (1 - p) / variance * (z / stats.t.ppf(1 - (1 - level) / 2, max(df, 1e-6))) ** 2
    low, high = beta_interval(p, n_eff, level, counts)
    reach = math.sqrt(variance) * abs(skewness) * (2 * z * z + 1) / 6
    low, high = (max(0.0, low - reach), high) if skewness < 0 else (low, min(1.0, high + reach))
    return (low, high), n_eff
